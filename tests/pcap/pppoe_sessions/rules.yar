rule split_drop { meta: action = "drop" strings: $a = "EVIL-PAYLOAD-SPLIT" condition: $a }
rule udp_alert { strings: $a = "UDP-BAD" condition: $a }
