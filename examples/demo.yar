// YARA rules of the demo configuration (examples/config.json, dpi.rule_files). Each rule's
// meta "action" says what the appliance does when it matches: "alert" (an event, the
// traffic passes), "drop" or "reset" (TCP RST to both ends, the flow is dropped).

rule EICAR_test_file
{
    meta:
        description = "EICAR anti-virus test file (harmless, every scanner detects it)"
        action = "reset"
    strings:
        $eicar = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
    condition:
        $eicar
}

rule sqlmap_scanner
{
    meta:
        description = "HTTP request from the sqlmap SQL injection scanner"
        action = "alert"
    strings:
        $ua = "User-Agent: sqlmap" nocase
    condition:
        $ua
}
