// Rules for files carried by HTTP (docs/http.md): offset 0 is the file's first byte.
rule pe_download {
  meta:
    action = "drop"
  condition:
    uint16(0) == 0x5A4D
}
rule eicar_test_file {
  meta:
    action = "drop"
  strings:
    $e = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
  condition:
    $e
}
