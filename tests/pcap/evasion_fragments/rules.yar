rule frag_evil { meta: action = "drop" strings: $a = "EVIL-FRAGMENTED-PAYLOAD" condition: $a }
