#!/usr/bin/env bash
# Operator tooling against the real appliance under traffic (net_pcap replayed forever ->
# net_null):
#  - /metrics (--metrics-listen 127.0.0.1:0) scraped while running and checked against the
#    gRPC answers around the scrape (metrics_check.py: names, HELP/TYPE, counter naming,
#    values between GetStats before and after, gauges, per-rule counters, applies);
#  - the events file rotated by size (--events-max-bytes/--events-keep): whole JSON lines,
#    at most keep rotated files, config applies as events;
#  - SIGHUP re-reads the files the committed config names (valid: next version, API changes
#    kept, --config not read; a broken file: logged, nothing changes); config reseed FILE;
#  - examples/systemd: the unit's ExecStartPre/ExecStart/ExecReload command lines, expanded
#    from the example environment file as systemd does, start, reload and stop it.
source "$(dirname "$0")/common.sh" "$@"
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
command -v curl >/dev/null || skip "curl missing (apt-get install curl)"

STATE=$WORK/state
CFG=$WORK/config.json
# (the DNS list and the YARA rule give the DNS and DPI counters something to count: the
# capture's UDP to port 53 is not a standard DNS message (inspected, passed), its UDP
# datagram to port 514 (20 x "l") matches the rule)
cat >"$WORK/http.yar" <<'Y'
rule syslog_l { strings: $a = "llllllllllllllll" condition: $a }
Y
cat >"$CFG" <<J
{"firewall": {"rules": [
  {"id": "no-ntp", "action": "DENY", "protocols": ["udp"], "dst_ports": ["123"]},
  {"id": "web", "action": "ALLOW", "protocols": ["tcp"], "dst_ports": ["80"]}]},
 "dns": {"lists": [{"name": "ads", "names": ["ads.example"]}]},
 "dpi": {"rule_files": ["$WORK/http.yar"]},
 "lb": {"services": [{"id": "idle-vip", "dst": ["198.51.100.80"], "protocol": "tcp",
   "dst_ports": "80", "mode": "LB_MODE_NAT",
   "backends": [{"id": "be1", "ipv4": "10.9.0.1", "port": 8080}]}]}}
J
start_appliance "$STATE" --config "$CFG" --metrics-listen 127.0.0.1:0 \
  --events "$WORK/eve.json" --events-max-bytes 20000 --events-keep 2
METRICS=$(sed -n 's|^dpu-appliance: metrics on http://\([^ ]*\)/metrics$|\1|p' "$APP_LOG" | head -1)
[[ -n $METRICS ]] || fail "no 'metrics on' line in the log"
[[ $METRICS == 127.0.0.1:* ]] || fail "metrics not on loopback: $METRICS"
sleep 1

# --- /metrics against GetStats / ListFirewallRules
ctl --json stats >"$WORK/s1.json"
curl -sf "http://$METRICS/metrics" -D "$WORK/headers.txt" -o "$WORK/metrics.txt" || fail "scrape failed"
ctl --json stats >"$WORK/s2.json"
ctl --json fw list >"$WORK/fw.json"
grep -qi '^content-type: text/plain' "$WORK/headers.txt" || fail "content type: $(cat "$WORK/headers.txt")"
$PY "$(dirname "$0")/metrics_check.py" "$WORK/s1.json" "$WORK/metrics.txt" "$WORK/s2.json" "$WORK/fw.json" \
  || fail "metrics differ from the gRPC stats"
grep -q '^dpu_drops_total{worker="0",reason="firewall_deny"} [1-9]' "$WORK/metrics.txt" || fail "no firewall_deny drops in the metrics"
grep -q '^dpu_firewall_rule_packets_total{rule="no-ntp"} [1-9]' "$WORK/metrics.txt" || fail "rule no-ntp has no packets"
# --- ops --- DNS and DPI under their own names (not the names derived from field paths)
grep -q '^dpu_dns_messages_total{worker="0"} [1-9]' "$WORK/metrics.txt" || fail "no DNS message count: $(grep dpu_dns "$WORK/metrics.txt")"
grep -q '^dpu_dns_list_names{list="ads",action="nxdomain"} 1$' "$WORK/metrics.txt" || fail "no DNS list metrics: $(grep dpu_dns_list "$WORK/metrics.txt")"
grep -q '^dpu_dpi_scanned_bytes_total{worker="0"} [1-9]' "$WORK/metrics.txt" || fail "no DPI bytes: $(grep dpu_dpi "$WORK/metrics.txt")"
grep -q '^dpu_dpi_matches_total{worker="0",action="alert"} [1-9]' "$WORK/metrics.txt" || fail "no DPI alert: $(grep dpu_dpi "$WORK/metrics.txt")"
! grep -q '^dpu_dns_total\|^dpu_dns_lists_\|^dpu_dpi_bytes_scanned' "$WORK/metrics.txt" || fail "derived DNS/DPI names: $(grep -e '^dpu_dns_total' -e '^dpu_dns_lists_' -e '^dpu_dpi_bytes_scanned' "$WORK/metrics.txt")"
# / is a small page linking /metrics; other paths are 404
curl -sf "http://$METRICS/" -o "$WORK/index.html" || fail "/ is not served"
grep -q 'href="/metrics"' "$WORK/index.html" || fail "/ does not link /metrics: $(cat "$WORK/index.html")"
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://$METRICS/nothing") == 404 ]] || fail "/nothing is served"
# every metric the example dashboard and alert rules query is exported (with every feature on)
$PY "$(dirname "$0")/dashboard_check.py" "$WORK/metrics.txt" "$SRC"/examples/grafana/*.json \
  "$SRC"/examples/prometheus/*.yml || fail "the example dashboard or alert rules query unknown metrics"
pass "metrics scraped under traffic match GetStats and ListFirewallRules"

# --- events file rotation: wait for two rotations
for ((i = 0; i < 100; i++)); do [[ -f $WORK/eve.json.2 ]] && break; sleep 0.1; done
# (the files are checked once the appliance has stopped: rotation goes on meanwhile)

# --- SIGHUP: the committed configuration is applied again and the files it names are read
# again; changes made through the API are kept; the --config file is not read.
# (one subscriber for the three config events to come: the API change, the reload, the
# refused reload; control events reach subscribers through the event pump, asynchronously)
ctl --json events --types config --count 3 >"$WORK/config-events.json" 2>&1 &
EV_PID=$!
BG_PIDS+=("$EV_PID")
until ctl --json stats 2>/dev/null | grep -q '"subscribers": *"\?[1-9]'; do sleep 0.1; done
ctl fw add "deny udp any any -> any 514 id no-syslog" >"$WORK/fwadd.out" 2>&1 || fail "fw add: $(cat "$WORK/fwadd.out")"
# a feed updates the YARA file on disk: one more rule
cat >>"$WORK/http.yar" <<'Y'
rule syslog_m { strings: $a = "mmmmmmmmmmmmmmmm" condition: $a }
Y
# and the --config file changes too: a reload must not apply it (that would lose no-syslog)
echo '{"firewall": {"rules": [{"id": "from-file", "action": "DENY", "protocols": ["tcp"], "dst_ports": ["7"]}]}}' >"$CFG"
kill -HUP "$APP_PID"
until grep -q "SIGHUP: re-read\|SIGHUP: the files" "$APP_LOG"; do kill -0 "$APP_PID" || fail "appliance died on SIGHUP"; sleep 0.1; done
grep -q "SIGHUP: re-read the files named by config version 2: applied as config version 3 (generation 3)" "$APP_LOG" \
  || fail "no SIGHUP apply in the log: $(grep SIGHUP "$APP_LOG")"
ctl config get >"$WORK/get.json"
[[ $(jq_py "$WORK/get.json" 'd["version"]') == 3 ]] || fail "version after SIGHUP"
[[ $(jq_py "$WORK/get.json" '[r["id"] for r in d["firewall"]["rules"]]') == "['no-ntp', 'web', 'no-syslog']" ]] \
  || fail "SIGHUP did not keep the API change (or applied --config): $(jq_py "$WORK/get.json" 'd["firewall"]')"
ctl --json dpi list >"$WORK/dpi.json" || fail "dpi list"
grep -q "syslog_m" "$WORK/dpi.json" || fail "SIGHUP did not re-read the YARA file: $(cat "$WORK/dpi.json")"
curl -sf "http://$METRICS/metrics" -o "$WORK/m2.txt"
grep -q '^dpu_config_version 3$' "$WORK/m2.txt" || fail "config_version after SIGHUP: $(grep config_version "$WORK/m2.txt")"
grep -q '^dpu_config_applies_total{result="applied"} 2$' "$WORK/m2.txt" || fail "applies after SIGHUP: $(grep applies_total "$WORK/m2.txt")"
grep -q '^dpu_config_apply_duration_seconds_count 2$' "$WORK/m2.txt" || fail "apply histogram"
# a named file that no longer compiles: refused, nothing changes, still running
cp "$WORK/http.yar" "$WORK/http.yar.good"
echo 'rule broken { strings: $a = "x" condition: $b }' >>"$WORK/http.yar"
kill -HUP "$APP_PID"
until grep -q "not applied" "$APP_LOG"; do kill -0 "$APP_PID" || fail "appliance died on a broken file"; sleep 0.1; done
grep -q "SIGHUP: the files named by config version 3 not applied, nothing changed" "$APP_LOG" || fail "broken file on SIGHUP not reported"
grep -q "error: .*http.yar" "$APP_LOG" || fail "the error does not name the file: $(tail -5 "$APP_LOG")"
kill -0 "$APP_PID" || fail "appliance died on a broken SIGHUP file"
ctl config get >"$WORK/get.json"
[[ $(jq_py "$WORK/get.json" 'd["version"]') == 3 ]] || fail "a broken file changed the version"
curl -sf "http://$METRICS/metrics" -o "$WORK/m3.txt" || fail "scrape failed"
grep -q '^dpu_config_applies_total{result="invalid"} 1$' "$WORK/m3.txt" || fail "invalid apply not counted: $(grep applies_total "$WORK/m3.txt")"
# --- ops --- the refusal is a config event (WatchEvents) and counted by phase
grep -q '^dpu_config_refused_total{phase="\(validate\|compile\)"} 1$' "$WORK/m3.txt" || fail "refusal not counted by phase: $(grep refused "$WORK/m3.txt")"
wait "$EV_PID" || fail "dpuctl events: $(cat "$WORK/config-events.json")"
$PY - "$WORK/config-events.json" <<'PYEOF' || fail "config events: $(cat "$WORK/config-events.json")"
import json, sys
text, events, i = open(sys.argv[1]).read(), [], 0
dec = json.JSONDecoder()
while i < len(text):
    if text[i].isspace():
        i += 1
        continue
    e, i = dec.raw_decode(text, i)
    events.append(e)
assert len(events) == 3 and all(e["type"] == "config" for e in events), events
add, reload, refused = events
assert json.loads(add["json"])["config"]["version"] == 2, add
r = json.loads(reload["json"])
assert r["config"]["version"] == 3 and r["config"]["generation"] == 3 and r["config"]["result"] == "applied", r
c = refused["config"]
assert c["result"] == "refused", refused
assert c["phase"] in ("validate", "compile") and c["code"] == "INVALID_ARGUMENT", c
assert int(c["based_on_version"]) == 3 and int(c["error_count"]) >= 1, c
j = json.loads(refused["json"])
assert j["event_type"] == "config" and j["config"]["result"] == "refused", j
assert j["config"]["version"] == 3, j
PYEOF
cp "$WORK/http.yar.good" "$WORK/http.yar"
pass "SIGHUP re-reads the files the committed config names and keeps API changes; a broken file changes nothing"

# --- dpuctl config reseed: the file becomes the running config again, explicitly
echo '{"firewall": {"rules": [{"id": "from-file", "action": "DENY", "protocols": ["tcp"], "dst_ports": ["7"]}]}}' >"$CFG"
rc=0
ctl config reseed "$CFG" </dev/null >"$WORK/reseed.out" 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "reseed without a terminal and without --yes: exit $rc: $(cat "$WORK/reseed.out")"
grep -q "no-syslog" "$WORK/reseed.out" || fail "reseed does not show what it discards: $(cat "$WORK/reseed.out")"
[[ $(ctl --json config get | $PY -c 'import json,sys; print(json.load(sys.stdin)["config"]["version"])') == 3 ]] || fail "reseed without --yes changed the config"
ctl config reseed "$CFG" --yes >"$WORK/reseed.out" 2>&1 || fail "reseed --yes: $(cat "$WORK/reseed.out")"
ctl config get >"$WORK/get.json"
[[ $(jq_py "$WORK/get.json" '[r["id"] for r in d["firewall"]["rules"]]') == "['from-file']" ]] || fail "reseed did not apply the file"
[[ $(jq_py "$WORK/get.json" 'd["version"]') == 4 ]] || fail "version after reseed"
pass "dpuctl config reseed shows what it discards, needs --yes without a terminal, applies the file"

# --- progress of a long apply: dpuctl polls GetStatus `tasks` while the apply runs
$PY - "$WORK/big.json" <<'PYEOF'
import json, sys
rules = [{"id": "r%d" % i, "action": "DENY", "protocols": ["tcp", "udp"],
          "dst": ["10.%d.%d.0/24" % (i // 256 % 256, i % 256), "2001:db8:%x::/48" % i],
          "dst_ports": ["%d" % (1000 + i % 60000), "20000-20100"]} for i in range(30000)]
json.dump({"firewall": {"rules": rules}}, open(sys.argv[1], "w"))
PYEOF
DPUCTL_PROGRESS=1 DPUCTL_PROGRESS_AFTER_MS=0 ctl config apply "$WORK/big.json" --force >"$WORK/big.out" 2>"$WORK/big.err" \
  || fail "big apply failed: $(cat "$WORK/big.err")"
grep -q "^dpuctl: config apply: " "$WORK/big.err" || fail "no progress line from dpuctl: $(cat "$WORK/big.err"; grep 'config apply' "$APP_LOG")"
grep -q "config apply: done in" "$APP_LOG" || fail "a long apply left no progress in the log"
echo "progress seen by dpuctl:"; sed 's/^/  /' "$WORK/big.err"
echo "progress in the log:"; grep "config apply" "$APP_LOG" | sed 's/^/  /'
stop_appliance
pass "long applies report progress (dpuctl line, log lines)"

[[ -f $WORK/eve.json.1 && -f $WORK/eve.json.2 ]] || fail "events file not rotated: $(ls -l "$WORK")"
[[ ! -e $WORK/eve.json.3 ]] || fail "more than --events-keep 2 rotated files"
for f in "$WORK/eve.json.1" "$WORK/eve.json.2"; do
  [[ $(stat -c %s "$f") -le 20000 ]] || fail "$f is larger than --events-max-bytes"
done
$PY - "$WORK/eve.json.1" "$WORK/eve.json.2" <<'PYEOF' || fail "rotated events files hold broken lines"
import json, sys
for p in sys.argv[1:]:
    n = 0
    for line in open(p):
        e = json.loads(line)
        assert e["event_type"] in ("drop", "flow", "config"), e
        if e["event_type"] == "drop":
            for k in ("timestamp", "flow_id", "src_ip", "src_port", "dest_ip", "dest_port",
                      "proto", "drop"):
                assert k in e, (k, e)
            if e["drop"]["reason"] == "firewall_deny":
                # The rule that decided, by id, and the action.
                # (the files were written after the SIGHUP apply too: no-syslog exists then)
                assert (e["drop"]["rule"], e["dest_port"]) in (("no-ntp", 123), ("no-syslog", 514)), e
                assert e["drop"]["action"] == "drop", e
        n += 1
    assert n > 10, (p, n)
PYEOF
pass "events file rotates at --events-max-bytes, whole lines, --events-keep files"

# --- examples/systemd: the unit's commands, expanded from the example environment file
UNIT=$SRC/examples/systemd/dpu-appliance.service
ENVF=$SRC/examples/systemd/dpu-appliance.env
# fail-open.json: everything passes, so the events file holds few events (flow ends).
cp "$SRC/examples/fail-open.json" "$WORK/unit-config.json"
OVR=("DPU_CONFIG=$WORK/unit-config.json" "DPU_STATE_DIR=$WORK/unit-state"
     "DPU_OPTIONS=--metrics-listen 127.0.0.1:0 --events $WORK/unit-eve.json --events-max-bytes 1000000"
     "DPU_EAL_ARGS=-l 0,1 --no-huge --no-pci --no-shconf --file-prefix=dpuit_unit_$$ -m 1024 --log-level=lib.eal:error --vdev net_pcap0,rx_pcap=$PCAP,infinite_rx=1 --vdev net_null0,no-rx=1")
unit_cmd() {  # unit_cmd KEY INDEX [MAINPID=N]: the argv, with the build's binary
  local -n out=$1
  mapfile -d '' -t out < <($PY "$(dirname "$0")/systemd_unit.py" "$UNIT" "$ENVF" "$2" "$3" "${OVR[@]}" "${@:4}")
  [[ ${out[0]} == /usr/local/bin/dpu-appliance ]] && out[0]=$APPLIANCE
  return 0
}
# The example environment file sets every variable the unit uses.
for v in DPU_CONFIG DPU_STATE_DIR DPU_OPTIONS DPU_EAL_ARGS; do
  grep -q "^$v=\"" "$ENVF" || fail "$ENVF does not set $v"
  grep -q "\${\?$v}\?" "$UNIT" || fail "$UNIT does not use $v"
done
unit_cmd PRE ExecStartPre 0
"${PRE[@]}" >"$WORK/pre.out" 2>&1 || fail "ExecStartPre failed: $(cat "$WORK/pre.out")"
grep -q "unit-config.json: ok" "$WORK/pre.out" || fail "ExecStartPre: $(cat "$WORK/pre.out")"
unit_cmd START ExecStart 0
grep -q '^Type=notify$' "$UNIT" || fail "the unit is not Type=notify"
# Type=notify: systemd's NOTIFY_SOCKET, played by a datagram socket that logs what arrives.
$PY - "$WORK/notify.sock" "$WORK/notify.log" <<'PYEOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        msg = s.recv(4096).decode()
        log.write(msg.replace("\n", " ") + "\n")
        if msg.startswith("STOPPING=1"):
            break
PYEOF
NOTIFY_PID=$!
BG_PIDS+=("$NOTIFY_PID")
for ((i = 0; i < 100; i++)); do [[ -S $WORK/notify.sock ]] && break; sleep 0.1; done
APP_LOG=$WORK/unit.log
NOTIFY_SOCKET=$WORK/notify.sock "${START[@]}" >"$WORK/unit.out" 2>"$APP_LOG" &
APP_PID=$!
APP_PIDS+=("$APP_PID")
for ((i = 0; i < 600; i++)); do grep -q "^READY=1" "$WORK/notify.log" 2>/dev/null && break; kill -0 "$APP_PID" || fail "unit ExecStart exited"; sleep 0.1; done
grep -q "^READY=1 STATUS=forwarding, config version 1, API on unix:" "$WORK/notify.log" || fail "no READY=1: $(cat "$WORK/notify.log" 2>&1)"
# READY=1 comes after the API answers and the workers forward: no wait needed here.
"$DPUCTL" --server "unix:$WORK/unit-state/api.sock" status >"$WORK/unit-status.out" 2>&1 || fail "dpuctl status right after READY=1: $(cat "$WORK/unit-status.out")"
grep -q "forwarding between" "$APP_LOG" || fail "READY=1 before forwarding: $(cat "$APP_LOG")"
[[ -S $WORK/unit-state/api.sock ]] || fail "no API socket in DPU_STATE_DIR"
[[ $($PY "$(dirname "$0")/systemd_unit.py" "$UNIT" "$ENVF" ExecReload count) == 2 ]] || fail "ExecReload lines"
# A change through the API, then `systemctl reload`: the change stays (the state directory
# is the source of truth), and the file DPU_CONFIG, edited meanwhile, is not applied.
"$DPUCTL" --server "unix:$WORK/unit-state/api.sock" config set firewall.keep_established_on_change=false \
  >"$WORK/unit-set.out" 2>&1 || fail "config set: $(cat "$WORK/unit-set.out")"
sed -i 's/"default_a_to_b": "ALLOW"/"default_a_to_b": "DENY"/' "$WORK/unit-config.json"
grep -q '"default_a_to_b": "DENY"' "$WORK/unit-config.json" || fail "could not edit DPU_CONFIG"
for n in 0 1; do
  unit_cmd RELOAD ExecReload $n "MAINPID=$APP_PID"
  [[ ${RELOAD[0]} == /bin/kill ]] && RELOAD[0]=kill
  "${RELOAD[@]}" >"$WORK/reload.out" 2>&1 || fail "ExecReload[$n] failed: $(cat "$WORK/reload.out")"
  # ExecReload[0] validates what the reload will apply: the committed config
  [[ $n == 1 ]] || grep -q "unit-state/config.json: ok" "$WORK/reload.out" || fail "ExecReload[0] did not check the committed config: $(cat "$WORK/reload.out")"
done
until grep -q "SIGHUP: re-read" "$APP_LOG"; do kill -0 "$APP_PID" || fail "unit appliance exited"; sleep 0.1; done
grep -q "SIGHUP: re-read the files named by config version 2: applied as config version 3" "$APP_LOG" || fail "systemctl reload did not re-apply: $(grep SIGHUP "$APP_LOG")"
until grep -q "^READY=1 STATUS=forwarding, config version 3" "$WORK/notify.log"; do sleep 0.1; done
grep -q "^RELOADING=1" "$WORK/notify.log" || fail "no RELOADING=1 on SIGHUP: $(cat "$WORK/notify.log")"
until grep -q '"event_type":"config","config":{"version":3' "$WORK/unit-eve.json" 2>/dev/null; do sleep 0.1; done
grep -q '"event_type":"config","config":{"version":3,"generation":3,"duration_ms":' "$WORK/unit-eve.json" \
  || fail "the reload is not a config event in the events file"
"$DPUCTL" --server "unix:$WORK/unit-state/api.sock" config get >"$WORK/unit-get.json"
[[ $(jq_py "$WORK/unit-get.json" 'd["firewall"].get("keep_established_on_change", False)') == False ]] \
  || fail "the reload discarded the API change"
[[ $(jq_py "$WORK/unit-get.json" 'd["firewall"].get("default_a_to_b", "")') != DENY ]] \
  || fail "the reload applied DPU_CONFIG"
stop_appliance
grep -q "final counters" "$WORK/unit.out" || fail "no final counters on stop"
wait "$NOTIFY_PID" 2>/dev/null
grep -q "^STOPPING=1" "$WORK/notify.log" || fail "no STOPPING=1 on stop: $(cat "$WORK/notify.log")"
# The state dir now holds the committed config: ExecStartPre checks that one (what runs),
# not the file that only seeded it.
unit_cmd PRE ExecStartPre 0
"${PRE[@]}" >"$WORK/pre2.out" 2>&1 || fail "ExecStartPre (committed config) failed: $(cat "$WORK/pre2.out")"
grep -q "unit-state/config.json: ok" "$WORK/pre2.out" || fail "ExecStartPre did not check the committed config: $(cat "$WORK/pre2.out")"
echo '{"dataplane": {"flow_table": {"capacity_per_worker": 1}}}' >"$WORK/unit-state/config.json"
! "${PRE[@]}" >"$WORK/pre3.out" 2>&1 || fail "ExecStartPre passed a broken committed config"
grep -q "capacity_per_worker" "$WORK/pre3.out" || fail "ExecStartPre error: $(cat "$WORK/pre3.out")"
if command -v systemd-analyze >/dev/null; then
  sed "s|/usr/local/bin/dpu-appliance|$(realpath "$APPLIANCE")|g; s|EnvironmentFile=.*|EnvironmentFile=$ENVF|" "$UNIT" >"$WORK/dpu-appliance.service"
  systemd-analyze verify "$WORK/dpu-appliance.service" >"$WORK/verify.out" 2>&1 || fail "systemd-analyze verify: $(cat "$WORK/verify.out")"
  [[ ! -s $WORK/verify.out ]] || fail "systemd-analyze verify: $(cat "$WORK/verify.out")"
fi
pass "examples/systemd unit: validate what runs, start (READY=1), reload (keeps API changes), stop"
