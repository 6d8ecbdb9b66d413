rule stream_marker { meta: action = "drop" strings: $a = "REORDERED-STREAM-MARKER-0123456789" condition: $a }
rule eicar { meta: action = "drop" strings: $e = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*" condition: $e }
