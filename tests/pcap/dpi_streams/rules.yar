rule split_drop { meta: action = "drop" strings: $a = "EVIL-PAYLOAD-SPLIT" condition: $a }
rule ooo_alert { strings: $a = "OUT-OF-ORDER-MARKER" condition: $a }
rule udp_alert { strings: $a = "UDP-BAD" condition: $a }
rule hex_drop { meta: action = "drop" strings: $h = { 13 37 ?? 42 [0-4] FE } condition: $h }
rule server_count { strings: $a = "tick" condition: #a >= 3 }
