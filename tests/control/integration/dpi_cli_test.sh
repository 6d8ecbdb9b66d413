#!/usr/bin/env bash
# --- dpi --- YARA rules through dpuctl against the real appliance: a rule file from the config
# (one rule matched, one unsupported: listed with its reason), `dpi add` from stdin into a rule
# set, its match counter moving with traffic (common.sh's capture repeats a UDP datagram of 30
# 'q'), the unsupported count and per-rule matches in `stats`, tags and metadata in the events
# file, libyara's error with the line of the added text (exit 4), a duplicate (exit 1), a rule
# of the rule file (exit 1, FAILED_PRECONDITION naming file:line), `dpi remove`, explain's DPI
# step, and the rule set surviving a restart.
source "$(dirname "$0")/common.sh" "$@"

STATE=$WORK/state
mkdir -p "$WORK/etc"
cat >"$WORK/etc/site.yar" <<'Y'
rule site_http : web { meta: author = "it" strings: $a = "GET / HTTP" condition: $a }
rule site_pe { condition: uint32(uint32(0x3C)) == 0x4550 }
Y
cat >"$WORK/etc/dpu.json" <<J
{"dpi": {"rule_files": ["$WORK/etc/site.yar"]}}
J
start_appliance "$STATE" --config "$WORK/etc/dpu.json" --events "$WORK/events.jsonl"

ctl --json dpi list >"$WORK/l1.json" || fail "dpi list"
[[ $(jq_py "$WORK/l1.json" 'd.get("accepted", 0), d.get("unsupported", 0)') == "(1, 1)" ]] ||
  fail "dpi list counts: $(cat "$WORK/l1.json")"
[[ $(jq_py "$WORK/l1.json" '[r["id"] for r in d["rules"] if not r.get("supported")]') == "['site.yar:site_pe']" ]] ||
  fail "unsupported rule: $(cat "$WORK/l1.json")"
[[ -n $(jq_py "$WORK/l1.json" '[r for r in d["rules"] if not r.get("supported")][0]["unsupported_reason"]') ]] ||
  fail "no reason for the unsupported rule"
ctl dpi list >"$WORK/l1.txt"
grep -q "site.yar:site_pe .*unsupported: " "$WORK/l1.txt" || fail "dpi list text: $(cat "$WORK/l1.txt")"
pass "dpi list: the rule file's rules, the unsupported one with its reason"

printf 'rule udp_q : noisy {\n  meta: ref = "T-1" severity = 2\n  strings: $q = "qqqqqqqqqq"\n  condition: $q\n}\n' |
  ctl dpi add - --set live >"$WORK/add.out" || fail "dpi add: $(cat "$WORK/add.out")"
grep -q "committed version" "$WORK/add.out" || fail "dpi add: $(cat "$WORK/add.out")"
udp_q_matched() {
  ctl --json dpi list >"$WORK/l2.json"
  [[ $(jq_py "$WORK/l2.json" 'int([r for r in d["rules"] if r["id"] == "live:udp_q"][0].get("matches", 0))') -gt 0 ]]
}
wait_until udp_q_matched || true
[[ $(jq_py "$WORK/l2.json" 'int([r for r in d["rules"] if r["id"] == "live:udp_q"][0].get("matches", 0))') -gt 0 ]] ||
  fail "live:udp_q never matched: $(cat "$WORK/l2.json")"
[[ $(jq_py "$WORK/l2.json" '[r for r in d["rules"] if r["id"] == "live:udp_q"][0]["origin"]') == rule_set ]] ||
  fail "origin: $(cat "$WORK/l2.json")"
ctl --json stats >"$WORK/s.json" || fail "stats"
[[ $(jq_py "$WORK/s.json" 'd["dpi"]["rules_unsupported"]') == 1 ]] || fail "stats dpi: $(jq_py "$WORK/s.json" 'd.get("dpi")')"
[[ $(jq_py "$WORK/s.json" 'int([r for r in d["dpi"]["rules"] if r["id"] == "live:udp_q"][0]["matches"])') -gt 0 ]] ||
  fail "stats per-rule matches: $(jq_py "$WORK/s.json" 'd.get("dpi")')"
[[ $(jq_py "$WORK/s.json" 'int(d["total"].get("dpi", {}).get("alerts", 0))') -gt 0 ]] || fail "stats dpi.alerts"
pass "dpi add from stdin: matched in traffic, counted per rule in dpi list and stats"

wait_until grep -q '"rule":"live:udp_q"' "$WORK/events.jsonl" 2>/dev/null || true
line=$(grep -m1 '"rule":"live:udp_q"' "$WORK/events.jsonl") || fail "no alert event for live:udp_q"
$PY - "$line" <<'PYEOF' || fail "alert event: $line"
import json, sys
a = json.loads(sys.argv[1])["alert"]
assert a["tags"] == ["noisy"], a
assert a["metadata"] == {"ref": ["T-1"], "severity": ["2"]}, a
assert a["action"] == "alert", a
PYEOF
pass "alert events carry the rule's tags and metadata"

printf 'rule ok_one { condition: true }\nrule bad_one {\n  condition: $nope }\n' >"$WORK/bad.yar"
rc=0; ctl dpi add "$WORK/bad.yar" --set live 2>"$WORK/bad.err" || rc=$?
[[ $rc -eq 4 ]] && grep -q "live:3: rule 'bad_one': text: yara: " "$WORK/bad.err" ||
  fail "syntax error: rc $rc $(cat "$WORK/bad.err")"
rc=0; printf 'rule udp_q { condition: true }' | ctl dpi add - --set live 2>"$WORK/dup.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q ALREADY_EXISTS "$WORK/dup.err" || fail "duplicate: rc $rc $(cat "$WORK/dup.err")"
rc=0; ctl dpi remove site_http 2>"$WORK/file.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q "FAILED_PRECONDITION" "$WORK/file.err" && grep -q "site.yar:1" "$WORK/file.err" ||
  fail "remove a file's rule: rc $rc $(cat "$WORK/file.err")"
pass "errors: libyara's message with the line in the added text (exit 4), duplicate, file rule"

ctl explain --src 10.0.0.3 --dst 10.0.0.4 --proto udp --sport 5000 --dport 53 --payload qqqqqqqqqqqq >"$WORK/ex.txt" ||
  fail "explain"
grep -q "^  dpi .*alert .*'live:udp_q' (alert)" "$WORK/ex.txt" || fail "explain dpi step: $(cat "$WORK/ex.txt")"
pass "explain shows the DPI step with the matching rule"

ctl dpi remove live:udp_q >/dev/null || fail "dpi remove"
ctl config get >"$WORK/cfg.json"
[[ $(jq_py "$WORK/cfg.json" 'len(d["dpi"].get("rule_sets", []))') == 0 ]] || fail "rule set left: $(cat "$WORK/cfg.json")"
printf 'rule keep_me { strings: $a = "nnnnnnnn" condition: $a }\n' | ctl dpi add --set kept >/dev/null || fail "dpi add kept"
pass "dpi remove (the empty set goes), dpi add with no FILE reads stdin"

stop_appliance
start_appliance "$STATE"
ctl --json dpi list >"$WORK/l3.json"
[[ $(jq_py "$WORK/l3.json" '[r["id"] for r in d["rules"] if r.get("origin") == "rule_set"]') == "['kept:keep_me']" ]] ||
  fail "after restart: $(cat "$WORK/l3.json")"
pass "rule sets survive a restart"
stop_appliance
