#!/usr/bin/env bash
# The load balancer through dpuctl against the real appliance: a service from the config
# file, `lb list` with per-backend counters moving with traffic (common.sh's capture has TCP
# 10.0.0.1 -> 10.0.0.2:80), `lb add` / `lb set` / `lb remove --drain` / `lb remove --flush
# --reset`, errors (duplicate: exit 1 ALREADY_EXISTS; invalid backend or negative weight:
# exit 4 naming the field), the backends surviving a restart, and the last backend removed
# only with --allow-empty.
source "$(dirname "$0")/common.sh" "$@"

STATE=$WORK/state
mkdir -p "$WORK/etc"
cat >"$WORK/etc/dpu.json" <<'J'
{"lb": {"services": [{"id": "web", "dst": ["10.0.0.2"], "protocol": "tcp", "dst_ports": "80",
  "backends": [{"id": "be1", "mac": "02:be:00:00:00:01"},
               {"id": "be2", "mac": "02:be:00:00:00:02"}]}]}}
J
start_appliance "$STATE" --config "$WORK/etc/dpu.json"

ctl --json lb list >"$WORK/l1.json" || fail "lb list"
[[ $(jq_py "$WORK/l1.json" 'len(d["services"][0]["backends"])') == 2 ]] || fail "lb list: $(cat "$WORK/l1.json")"
[[ $(jq_py "$WORK/l1.json" 'sum(b["table_slots"] for b in d["services"][0]["backends"])') == 65537 ]] ||
  fail "table slots: $(cat "$WORK/l1.json")"
backends_counted() {
  ctl --json lb list >"$WORK/l2.json"
  [[ $(jq_py "$WORK/l2.json" 'sum(int(b.get("packets", 0)) for b in d["services"][0]["backends"])') -gt 0 ]]
}
wait_until backends_counted || true
[[ $(jq_py "$WORK/l2.json" 'sum(int(b.get("packets", 0)) for b in d["services"][0]["backends"])') -gt 0 ]] ||
  fail "no packets counted on the backends: $(cat "$WORK/l2.json")"
[[ $(jq_py "$WORK/l2.json" 'sum(int(b.get("total_flows", 0)) for b in d["services"][0]["backends"])') -gt 0 ]] ||
  fail "no flows counted on the backends: $(cat "$WORK/l2.json")"
ctl lb list >"$WORK/l2.txt"
grep -q "^service web  mode l2" "$WORK/l2.txt" || fail "lb list text: $(cat "$WORK/l2.txt")"
pass "lb list: the service from the config, table slots, counters move with traffic"

ctl lb add web be3 --mac 02:be:00:00:00:03 --weight 2 >"$WORK/add.out" || fail "lb add"
grep -q "committed version" "$WORK/add.out" || fail "lb add: $(cat "$WORK/add.out")"
rc=0; ctl lb add web be3 --mac 02:be:00:00:00:03 2>"$WORK/dup.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q ALREADY_EXISTS "$WORK/dup.err" || fail "duplicate add: rc $rc $(cat "$WORK/dup.err")"
rc=0; ctl lb add web be9 --ipv4 10.9.0.9 2>"$WORK/bad.err" || rc=$?
[[ $rc -eq 4 ]] && grep -q "lb.services\[0\].backends\[3\].mac" "$WORK/bad.err" ||
  fail "invalid add: rc $rc $(cat "$WORK/bad.err")"
rc=0; ctl lb add nope be1 --mac 02:be:00:00:00:01 2>"$WORK/nf.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q NOT_FOUND "$WORK/nf.err" || fail "unknown service: rc $rc"
rc=0; ctl lb set web be1 --weight -1 2>"$WORK/neg.err" || rc=$?
[[ $rc -eq 4 ]] && grep -q "weight: -1 is out of range" "$WORK/neg.err" ||
  fail "negative weight: rc $rc $(cat "$WORK/neg.err")"
rc=0; ctl lb add web be9 --mac ff:ff:ff:ff:ff:ff 2>"$WORK/bcast.err" || rc=$?
[[ $rc -eq 4 ]] && grep -q "lb.services\[0\].backends\[3\].mac: ff:ff:ff:ff:ff:ff is the broadcast" "$WORK/bcast.err" ||
  fail "broadcast MAC: rc $rc $(cat "$WORK/bcast.err")"
pass "lb add; duplicate (exit 1), invalid (exit 4, field named: no MAC, broadcast MAC), negative weight (exit 4), unknown service"

ctl lb set web be1 --weight 3 >/dev/null || fail "lb set"
ctl lb remove web be2 --drain >/dev/null || fail "lb remove --drain"
ctl --json lb list >"$WORK/l3.json"
[[ $(jq_py "$WORK/l3.json" 'd["services"][0]["backends"][0]["backend"]["weight"]') == 3 ]] || fail "weight"
[[ $(jq_py "$WORK/l3.json" 'd["services"][0]["backends"][1]["backend"].get("state")') == LB_BACKEND_DRAINING ]] ||
  fail "drain: $(cat "$WORK/l3.json")"
[[ $(jq_py "$WORK/l3.json" 'd["services"][0]["backends"][1].get("table_slots", 0)') == 0 ]] || fail "draining in the table"
ctl lb remove web be2 --flush --reset >/dev/null || fail "lb remove --flush --reset"
ctl config get >"$WORK/cfg.json"
[[ $(jq_py "$WORK/cfg.json" '[b["id"] for b in d["lb"]["services"][0]["backends"]]') == "['be1', 'be3']" ]] ||
  fail "backends after flush: $(cat "$WORK/cfg.json")"
[[ $(jq_py "$WORK/cfg.json" 'd["lb"]["services"][0]["orphans"]') == LB_ORPHANS_RESET ]] || fail "orphans"
pass "lb set, remove --drain (out of the table, still listed), remove --flush --reset"

stop_appliance
start_appliance "$STATE"
ctl --json lb list >"$WORK/l4.json"
[[ $(jq_py "$WORK/l4.json" '[b["backend"]["id"] for b in d["services"][0]["backends"]]') == "['be1', 'be3']" ]] ||
  fail "after restart: $(cat "$WORK/l4.json")"
pass "backends survive a restart"

ctl lb remove web be3 --flush >/dev/null || fail "lb remove --flush be3"
rc=0; ctl lb remove web be1 --flush 2>"$WORK/last.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q "last backend" "$WORK/last.err" || fail "last backend: rc $rc $(cat "$WORK/last.err")"
ctl lb remove web be1 --flush --allow-empty >/dev/null || fail "lb remove --flush --allow-empty"
ctl --json lb list >"$WORK/l5.json"
[[ $(jq_py "$WORK/l5.json" 'len(d["services"][0].get("backends", []))') == 0 ]] || fail "empty: $(cat "$WORK/l5.json")"
pass "the last backend goes only with --allow-empty"
stop_appliance
