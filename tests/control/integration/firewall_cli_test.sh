#!/usr/bin/env bash
# Firewall and GeoIP through dpuctl against the real appliance: a config whose rule file and
# IP set file are relative to the config file, `fw load`, per-rule counters moving with
# traffic (and the firewall_deny drop reason), `fw add` / `fw remove`, errors naming the
# field (exit 4), `geo set` / `geo lookup` with MaxMind's test database, and the rules
# surviving a restart.
source "$(dirname "$0")/common.sh" "$@"

MMDB_DIR="$(cd "$(dirname "$0")/../../../.." && pwd)/shared/data/mmdb/maxmind+MaxMind-DB/test-data"
COUNTRY_DB=$MMDB_DIR/GeoLite2-Country-Test.mmdb
ASN_DB=$MMDB_DIR/GeoLite2-ASN-Test.mmdb

STATE=$WORK/state
mkdir -p "$WORK/etc/rules"
cat >"$WORK/etc/rules/site.rules" <<'R'
# traffic of common.sh's capture: TCP 10.0.0.1 -> 10.0.0.2:80, UDP to ports 53, 123, 514
deny udp any any -> any 53 id dns-block
allow tcp @lab any -> any 80 prio 5 id web
R
echo "10.0.0.0/8" >"$WORK/etc/lab.txt"
cat >"$WORK/etc/dpu.json" <<'J'
{"firewall": {"ip_sets": [{"name": "lab", "file": "lab.txt"}],
              "rule_files": ["rules/site.rules"]}}
J
start_appliance "$STATE" --config "$WORK/etc/dpu.json"

# --- rules from a rule file, with counters that move with traffic
ctl --json fw list >"$WORK/l1.json" || fail "fw list"
[[ $(jq_py "$WORK/l1.json" 'len(d["rules"])') == 2 ]] || fail "fw list: $(cat "$WORK/l1.json")"
[[ $(jq_py "$WORK/l1.json" 'd["rules"][0]["source"]') == "$WORK/etc/rules/site.rules:2" ]] ||
  fail "source: $(jq_py "$WORK/l1.json" 'd["rules"][0]["source"]')"
sleep 1
ctl --json fw list >"$WORK/l2.json"
[[ $(jq_py "$WORK/l2.json" 'int(d["rules"][0].get("packets", 0)) > 0') == True ]] ||
  fail "dns-block counted nothing: $(cat "$WORK/l2.json")"
[[ $(jq_py "$WORK/l2.json" 'int(d["rules"][1].get("flows", 0)) > 0') == True ]] ||
  fail "web judged no flow: $(cat "$WORK/l2.json")"
[[ $(jq_py "$WORK/l2.json" 'int(d["rules"][0].get("last_hit_unix_ns", 0)) > 1600000000 * 10**9') == True ]] ||
  fail "last hit time: $(cat "$WORK/l2.json")"
ctl stats >"$WORK/stats.txt"
grep -q "firewall_deny" "$WORK/stats.txt" || fail "no firewall_deny drops: $(cat "$WORK/stats.txt")"
ctl fw list >"$WORK/list.txt"
grep -q "dns-block  deny" "$WORK/list.txt" || fail "fw list table: $(cat "$WORK/list.txt")"
pass "rule files relative to the config, counters"

# --- fw load, add, remove, errors
cat >"$WORK/new.rules" <<'R'
deny udp any any -> any 123 id ntp-block
R
ctl fw load "$WORK/new.rules" >"$WORK/load.out" || fail "fw load: $(cat "$WORK/load.out")"
grep -q "1 rule(s) loaded" "$WORK/load.out" || fail "fw load: $(cat "$WORK/load.out")"
ctl config get >"$WORK/cfg.json"
[[ $(jq_py "$WORK/cfg.json" 'len(d["firewall"].get("rule_files", []))') == 0 ]] || fail "rule_files kept"
ctl fw add "deny tcp any any -> 192.0.2.0/24 22 prio 10 id ssh-block" >/dev/null || fail "fw add"
rc=0; ctl fw add "deny tcp @nope any -> any 22 id x" 2>"$WORK/add.err" || rc=$?
[[ $rc -eq 4 ]] || fail "fw add with an unknown set: rc $rc"
grep -q "firewall.rules\[2\].src: unknown IP set '@nope'" "$WORK/add.err" || fail "$(cat "$WORK/add.err")"
rc=0; ctl fw add "deny tcp any any -> 10.0.0.1/8 22 id y" 2>"$WORK/add2.err" || rc=$?
[[ $rc -eq 4 ]] || fail "fw add with host bits: rc $rc"
grep -q "did you mean 10.0.0.0/8" "$WORK/add2.err" || fail "$(cat "$WORK/add2.err")"
ctl fw remove ntp-block >/dev/null || fail "fw remove"
ctl --json fw list >"$WORK/l3.json"
ids=$(jq_py "$WORK/l3.json" '",".join(r["rule"]["id"] for r in d["rules"])')
[[ "$ids" == "ssh-block" ]] || fail "after remove: $ids"
pass "fw load / add / remove, errors (exit 4)"

# --- GeoIP
if [[ -f $COUNTRY_DB && -f $ASN_DB ]]; then
  rc=0; ctl geo set "$ASN_DB" 2>"$WORK/geo.err" || rc=$?
  [[ $rc -eq 1 ]] || fail "geo set with an ASN database: rc $rc"
  grep -q "no country data" "$WORK/geo.err" || fail "$(cat "$WORK/geo.err")"
  ctl geo set "$COUNTRY_DB" >/dev/null || fail "geo set"
  ctl fw add "reject tcp any any -> any 443 src-country GB id no-gb" >/dev/null || fail "country rule"
  ctl geo lookup 81.2.69.142 >"$WORK/lookup.txt" || fail "geo lookup"
  grep -q "country GB" "$WORK/lookup.txt" || fail "geo lookup: $(cat "$WORK/lookup.txt")"
  grep -q "firewall country index 1" "$WORK/lookup.txt" || fail "geo lookup: $(cat "$WORK/lookup.txt")"
  pass "geo set (checked first) / lookup"
else
  echo "note: MaxMind test databases absent ($MMDB_DIR): GeoIP part skipped"
fi

# --- persisted: a restart runs the same rules
ctl --json fw list >"$WORK/before.json"
stop_appliance
start_appliance "$STATE"
ctl --json fw list >"$WORK/after.json"
before=$(jq_py "$WORK/before.json" '[r["rule"]["id"] for r in d["rules"]]')
after=$(jq_py "$WORK/after.json" '[r["rule"]["id"] for r in d["rules"]]')
[[ "$before" == "$after" && "$before" == *ssh-block* ]] || fail "rules after restart: $after (before: $before)"
stop_appliance
pass "rules survive a restart"
