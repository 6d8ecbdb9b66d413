rule kill_switch : c2 exfil {
  meta:
    author = "soc team"
    action = "reset"
    severity = 3
  strings:
    $a = "KILL-SWITCH"
  condition:
    $a
}
rule reset_by_config { strings: $a = "RESET-BY-CONFIG" condition: $a }
rule watch_only : audit { meta: ref = "T1041" strings: $a = "WATCH-ME" condition: $a }
