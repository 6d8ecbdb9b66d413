rule split_drop { meta: action = "drop" strings: $a = "EVIL-PAYLOAD-SPLIT" condition: $a }
