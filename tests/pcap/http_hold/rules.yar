rule small_pe { meta: action = "drop" condition: uint16(0) == 0x5A4D and filesize < 4000 }
rule evil_end { meta: action = "drop" strings: $e = /EVIL-TRAILER$/ condition: $e }
