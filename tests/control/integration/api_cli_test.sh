#!/usr/bin/env bash
# dpuctl against the real appliance: status, config get/apply/diff/validate/set, version
# conflict (exit 3 + message), invalid config (exit 4 + every error), stats show traffic,
# stats --watch, events stream (drop and config), explain, the --events file, the unix
# socket's mode, --listen 0.0.0.0 refused without --listen-any, clean SIGTERM.
source "$(dirname "$0")/common.sh" "$@"

STATE=$WORK/state
start_appliance "$STATE" --events "$WORK/events.jsonl"
[[ $APP_ADDR == "unix:$STATE/api.sock" ]] || fail "default address is '$APP_ADDR'"

# --- socket and state directory permissions
[[ $(stat -c %a "$STATE/api.sock") == 600 ]] || fail "api.sock mode $(stat -c %a "$STATE/api.sock")"
[[ -S $STATE/api.sock ]] || fail "api.sock is not a socket"
[[ $(stat -c %a "$STATE") == 700 ]] || fail "state dir mode $(stat -c %a "$STATE")"
pass "unix socket 0600 in a 0700 state directory"

# --- status
ctl status >"$WORK/status.txt" || fail "status failed"
grep -q "^instance" "$WORK/status.txt" || fail "status: no instance line"
grep -q "config       version 1, snapshot generation 1" "$WORK/status.txt" || fail "status: $(cat "$WORK/status.txt")"
ctl --json status >"$WORK/status.json"
[[ $(jq_py "$WORK/status.json" 'len(d["instance_id"])') == 32 ]] || fail "instance_id"
[[ $(jq_py "$WORK/status.json" 'd["build"]["version"]') == 0.1.0 ]] || fail "build version"
[[ $(jq_py "$WORK/status.json" 'd["workers"][0]["generation"]') == 1 ]] || fail "worker generation"
[[ $(jq_py "$WORK/status.json" 'd["ports"][0]["name"]') == net_pcap0 ]] || fail "port A name"
DPUCTL_SERVER=$APP_ADDR "$DPUCTL" status >/dev/null || fail "DPUCTL_SERVER not honoured"
pass "status"

# --- config get / validate / apply / conflict / diff / set
ctl config get >"$WORK/get1.json"
[[ $(jq_py "$WORK/get1.json" 'd["version"]') == 1 ]] || fail "config get: version"

cat >"$WORK/good.json" <<'J'
{"dataplane": {"non_ip": "FORWARD", "timeouts": {"udp_s": 33}, "tcp": {"midstream": "FORWARD"}}}
J
cat >"$WORK/bad.json" <<'J'
{"dataplane": {"flow_table": {"capacity_per_worker": 5}, "timeouts": {"tcp_syn_s": 999999999},
               "fragments": {"max_fragments": 1}}}
J
ctl config validate "$WORK/good.json" >"$WORK/v.out" || fail "validate good: rc $?"
grep -q "valid" "$WORK/v.out" || fail "validate good: $(cat "$WORK/v.out")"
rc=0; ctl config validate "$WORK/bad.json" 2>"$WORK/v.err" || rc=$?
[[ $rc -eq 4 ]] || fail "validate bad: rc $rc (want 4)"
for f in dataplane.flow_table.capacity_per_worker dataplane.timeouts.tcp_syn_s dataplane.fragments.max_fragments; do
  grep -q "error: $f:" "$WORK/v.err" || fail "validate bad: $f not listed: $(cat "$WORK/v.err")"
done
rc=0; ctl config apply "$WORK/bad.json" 2>"$WORK/a.err" || rc=$?
[[ $rc -eq 4 ]] || fail "apply bad: rc $rc (want 4)"
grep -q "INVALID_ARGUMENT: 3 errors" "$WORK/a.err" || fail "apply bad: $(cat "$WORK/a.err")"
[[ $(grep -c "^  error: dataplane\." "$WORK/a.err") -eq 3 ]] || fail "apply bad: not 3 error lines: $(cat "$WORK/a.err")"
ctl config get >"$WORK/get2.json"
[[ $(jq_py "$WORK/get2.json" 'd["version"]') == 1 ]] || fail "invalid apply changed the version"
pass "validate and invalid apply list every error (exit 4)"

ctl config apply "$WORK/good.json" >"$WORK/apply.out" || fail "apply good failed"
grep -q "committed version 2 (snapshot generation 2)" "$WORK/apply.out" || fail "apply: $(cat "$WORK/apply.out")"
ctl config get >"$WORK/get3.json"
[[ $(jq_py "$WORK/get3.json" 'd["version"]') == 2 ]] || fail "version after apply"
[[ $(jq_py "$WORK/get3.json" 'd["dataplane"]["timeouts"]["udp_s"]') == 33 ]] || fail "content after apply"
rc=0; ctl config apply "$WORK/good.json" --expected-version 1 2>"$WORK/c.err" || rc=$?
[[ $rc -eq 3 ]] || fail "conflict: rc $rc (want 3)"
grep -q "ABORTED: config version moved: expected 1, committed 2" "$WORK/c.err" || fail "conflict: $(cat "$WORK/c.err")"
rc=0; ctl config apply "$WORK/good.json" --expected-version 1 --force 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "--expected-version with --force: rc $rc (want 2)"
pass "apply, version conflict (exit 3)"

cat >"$WORK/next.json" <<'J'
{"dataplane": {"non_ip": "DROP", "timeouts": {"udp_s": 33, "icmp_s": 7}}}
J
ctl config diff "$WORK/next.json" >"$WORK/diff.out" || fail "diff failed"
grep -q '^~ dataplane.non_ip: "FORWARD" -> "DROP"$' "$WORK/diff.out" || fail "diff: $(cat "$WORK/diff.out")"
grep -q '^+ dataplane.timeouts.icmp_s: 7' "$WORK/diff.out" || fail "diff: $(cat "$WORK/diff.out")"
grep -q '^- dataplane.tcp.midstream: "FORWARD"' "$WORK/diff.out" || fail "diff: $(cat "$WORK/diff.out")"
grep -q 'udp_s' "$WORK/diff.out" && fail "diff shows an unchanged field: $(cat "$WORK/diff.out")"
ctl config diff "$WORK/good.json" | grep -q "no differences" || fail "diff of the committed content"
pass "diff"

ctl config set dataplane.timeouts.udp_s=45 dataplane.fragments.timeout_ms=500 >"$WORK/set.out" || fail "set failed"
grep -q "committed version 3" "$WORK/set.out" || fail "set: $(cat "$WORK/set.out")"
ctl config get >"$WORK/get4.json"
[[ $(jq_py "$WORK/get4.json" 'd["dataplane"]["timeouts"]["udp_s"]') == 45 ]] || fail "set: udp_s"
[[ $(jq_py "$WORK/get4.json" 'd["dataplane"]["fragments"]["timeout_ms"]') == 500 ]] || fail "set: timeout_ms"
[[ $(jq_py "$WORK/get4.json" 'd["dataplane"]["tcp"]["midstream"]') == FORWARD ]] || fail "set changed an unmasked field"
rc=0; ctl config set dataplane.no_such=1 2>"$WORK/s.err" || rc=$?
[[ $rc -eq 2 ]] || fail "set unknown path: rc $rc"
grep -q "dataplane.no_such" "$WORK/s.err" || fail "set unknown path: $(cat "$WORK/s.err")"
rc=0; ctl config set dataplane.timeouts.udp_s=100000 2>"$WORK/s2.err" || rc=$?
[[ $rc -eq 4 ]] || fail "set out of range: rc $rc"
grep -q "error: dataplane.timeouts.udp_s: 100000 is out of range" "$WORK/s2.err" || fail "set out of range: $(cat "$WORK/s2.err")"
rc=0; ctl config set dataplane.timeouts.udp_s=46 --expected-version 2 2>/dev/null || rc=$?
[[ $rc -eq 3 ]] || fail "set with a stale version: rc $rc"
pass "set (update mask)"

# --- stats: traffic flows A -> B
sleep 0.5
ctl --json stats >"$WORK/stats.json"
[[ $(jq_py "$WORK/stats.json" 'int(d["ports"][0]["rx_packets"]) > 1000') == True ]] || fail "no rx on side A"
[[ $(jq_py "$WORK/stats.json" 'int(d["ports"][1]["tx_packets"]) > 1000') == True ]] || fail "no tx on side B"
[[ $(jq_py "$WORK/stats.json" 'int(d["total"]["forwarded"]) > 1000') == True ]] || fail "nothing forwarded"
[[ $(jq_py "$WORK/stats.json" 'int(d["total"]["flows_active"]) >= 5') == True ]] || fail "flows_active"
ctl stats >"$WORK/stats.txt"
grep -q "^ports" "$WORK/stats.txt" && grep -q "net_pcap0" "$WORK/stats.txt" || fail "stats table: $(cat "$WORK/stats.txt")"
ctl --json stats --watch --interval 200 --count 3 >"$WORK/watch.jsonl" || fail "stats --watch failed"
[[ $(wc -l <"$WORK/watch.jsonl") -eq 3 ]] || fail "stats --watch: $(wc -l <"$WORK/watch.jsonl") samples"
$PY - "$WORK/watch.jsonl" <<'PYEOF' || fail "stats --watch samples do not advance"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])]
ts = [int(x["timestamp_unix_ns"]) for x in s]
rx = [int(x["ports"][0]["rx_packets"]) for x in s]
assert all(b - a >= 150_000_000 for a, b in zip(ts, ts[1:])), ts
# Counters never go back and traffic shows over the window; consecutive 200 ms samples may be
# equal when a loaded 2-core machine leaves the worker off its CPU for that long.
assert rx[0] <= rx[1] <= rx[2] and rx[0] < rx[2], rx
PYEOF
pass "stats, stats --watch"

# --- events: drops while non-IP is dropped; a config event per commit
ctl config set dataplane.non_ip=DROP >/dev/null
ctl --json events --types drop --count 5 >"$WORK/drops.jsonl" || fail "events failed"
ctl config set dataplane.non_ip=FORWARD >/dev/null
[[ $(wc -l <"$WORK/drops.jsonl") -eq 5 ]] || fail "events: $(wc -l <"$WORK/drops.jsonl") lines"
$PY - "$WORK/drops.jsonl" <<'PYEOF' || fail "drop events: $(head -2 "$WORK/drops.jsonl")"
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    assert e["type"] == "drop" and e["reason"] == "non_ip" and e["stage"] == "parse", e
    assert json.loads(e["json"])["event_type"] == "drop"
PYEOF
ctl --json events --types config --count 1 >"$WORK/config_ev.jsonl" &
ev_pid=$!
BG_PIDS+=("$ev_pid")
for ((i = 0; i < 40; i++)); do
  kill -0 "$ev_pid" 2>/dev/null || break
  ctl config set "dataplane.timeouts.icmp_s=$((10 + i))" >/dev/null
  sleep 0.25
done
wait "$ev_pid" || fail "events --types config exited non-zero"
grep -q '"type":"config"' "$WORK/config_ev.jsonl" || fail "config event: $(cat "$WORK/config_ev.jsonl")"
grep -q '"config_version"' "$WORK/config_ev.jsonl" || fail "config event has no version"
ctl events --types drop --count 1 >/dev/null 2>&1 &
human_pid=$!
BG_PIDS+=("$human_pid")
sleep 0.3
ctl config set dataplane.non_ip=DROP >/dev/null
wait "$human_pid" || fail "human events output failed"
ctl config set dataplane.non_ip=FORWARD >/dev/null
pass "events (drop, config)"

# --- explain
ctl explain --src 10.0.0.1 --dst 10.0.0.2 --proto tcp --sport 40000 --dport 443 --flags S >"$WORK/ex.txt" || fail "explain tuple"
grep -q "^verdict    forward" "$WORK/ex.txt" || fail "explain: $(cat "$WORK/ex.txt")"
grep -q "10.0.0.1:40000 -> 10.0.0.2:443" "$WORK/ex.txt" || fail "explain summary: $(cat "$WORK/ex.txt")"
ctl config set dataplane.non_ip=DROP >/dev/null
arp=ffffffffffff020000000001080600010800060400010200000000010a0000010000000000000a000002
ctl --json explain --frame-hex "$arp" --side B >"$WORK/ex.json" || fail "explain frame"
[[ $(jq_py "$WORK/ex.json" 'd["verdict"] + "/" + d["reason"]') == drop/non_ip ]] || fail "explain frame: $(cat "$WORK/ex.json")"
ctl config set dataplane.non_ip=FORWARD >/dev/null
rc=0; ctl explain --src 10.0.0.1 --dst ::1 --proto tcp 2>"$WORK/ex.err" || rc=$?
[[ $rc -eq 4 ]] || fail "explain mixed families: rc $rc"
grep -q "address family" "$WORK/ex.err" || fail "explain error: $(cat "$WORK/ex.err")"
pass "explain"

# --- usage errors and help
rc=0; "$DPUCTL" frobnicate 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "unknown command: rc $rc"
rc=0; "$DPUCTL" 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "no command: rc $rc"
grep -q "config apply FILE" <<<"$("$DPUCTL" --help)" || fail "dpuctl --help"
grep -q "examples:" <<<"$("$DPUCTL" config --help)" || fail "dpuctl config --help"
grep -q -- "--frame-hex" <<<"$("$DPUCTL" explain --help)" || fail "dpuctl explain --help"
rc=0; "$DPUCTL" --server "unix:$WORK/nothing.sock" status 2>"$WORK/un.err" || rc=$?
[[ $rc -eq 1 ]] || fail "unreachable server: rc $rc"
grep -q "UNAVAILABLE" "$WORK/un.err" || fail "unreachable: $(cat "$WORK/un.err")"
pass "usage errors (exit 2), unreachable server (exit 1), help"

# --- the events file written by the pump
grep -q '"event_type":"drop"' "$WORK/events.jsonl" || fail "events file has no drop event"
grep -q '"event_type":"config"' "$WORK/events.jsonl" || fail "events file has no config event"
pass "--events file"

# --- clean stop: exit 0, final counters, socket removed
stop_appliance
grep -q "dpu-appliance run: final counters" "$APP_OUT" || fail "no final summary"
[[ ! -e $STATE/api.sock ]] || fail "api.sock left behind"
pass "SIGTERM: clean exit"

# --- listening rules
rc=0; "$APPLIANCE" run --state-dir "$WORK/s2" --listen 0.0.0.0:0 -- -l 0,1 --no-huge --no-pci \
  --no-shconf --file-prefix="dpuit_refuse_$$" -m 1024 >/dev/null 2>"$WORK/refuse.err" || rc=$?
[[ $rc -ne 0 ]] || fail "--listen 0.0.0.0 accepted without --listen-any"
grep -q -- "--listen-any" "$WORK/refuse.err" || fail "refusal message: $(cat "$WORK/refuse.err")"
grep -q "EAL" "$WORK/refuse.err" && fail "refusal came after EAL start-up"
rc=0; "$APPLIANCE" run --state-dir "$WORK/s2" --listen "[::]:0" -- -l 0,1 >/dev/null 2>"$WORK/refuse6.err" || rc=$?
[[ $rc -ne 0 ]] || fail "--listen [::] accepted without --listen-any"
grep -q -- "refusing '\[::\]:0'" "$WORK/refuse6.err" || fail "refusal message: $(cat "$WORK/refuse6.err")"
start_appliance "$WORK/s3" --listen 0.0.0.0:0 --listen-any
[[ $APP_ADDR =~ ^0\.0\.0\.0:[0-9]+$ ]] || fail "listen-any address '$APP_ADDR'"
port=${APP_ADDR##*:}
[[ $port -gt 0 ]] || fail "no port bound"
"$DPUCTL" --server "127.0.0.1:$port" status >/dev/null || fail "status over TCP"
stop_appliance
start_appliance "$WORK/s4" --listen 127.0.0.1:0
"$DPUCTL" --server "$APP_ADDR" status >/dev/null || fail "status over loopback TCP"
stop_appliance
pass "--listen: loopback ok, 0.0.0.0/:: refused without --listen-any, accepted with it"
echo "PASS $TEST_NAME"
