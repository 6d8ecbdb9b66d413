rule tun_drop { meta: action = "drop" strings: $a = "EVIL-IN-TUNNEL" condition: $a }
