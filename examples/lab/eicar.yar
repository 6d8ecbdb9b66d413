// The EICAR anti-virus test file (https://www.eicar.org/download-anti-malware-testfile/):
// 68 harmless bytes every scanner detects. The lab's HTTP server serves it as /eicar.com.
rule eicar_test_file
{
  meta:
    description = "EICAR anti-virus test file"
    action = "reset"
  strings:
    $eicar = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
  condition:
    $eicar
}
