rule late_rule { strings: $a = "LATE-RULE" condition: $a }
