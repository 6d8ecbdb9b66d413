rule pe_header { meta: action = "drop" condition: uint16(0) == 0x5A4D }
rule eicar { meta: action = "drop" strings: $e = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*" condition: $e }
