#!/usr/bin/env bash
# Operator tooling against the real appliance under traffic (net_pcap replayed forever ->
# net_null):
#  - /metrics (--metrics-listen 127.0.0.1:0) scraped while running and checked against the
#    gRPC answers around the scrape (metrics_check.py: names, HELP/TYPE, counter naming,
#    values between GetStats before and after, gauges, per-rule counters, applies);
#  - the events file rotated by size (--events-max-bytes/--events-keep): whole JSON lines,
#    at most keep rotated files, config applies as events;
#  - SIGHUP re-applies the --config file (valid: next version; invalid: logged, nothing
#    changes, still running);
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
 "dpi": {"rule_files": ["$WORK/http.yar"]}}
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
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://$METRICS/") == 404 ]] || fail "/ is served"
pass "metrics scraped under traffic match GetStats and ListFirewallRules"

# --- events file rotation: wait for two rotations
wait_until test -f "$WORK/eve.json.2" || true
# (the files are checked once the appliance has stopped: rotation goes on meanwhile)

# --- SIGHUP: the --config file is applied again
cat >"$CFG" <<J
{"firewall": {"rules": [
  {"id": "no-ntp", "action": "DENY", "protocols": ["udp"], "dst_ports": ["123"]},
  {"id": "no-syslog", "action": "DENY", "protocols": ["udp"], "dst_ports": ["514"]},
  {"id": "web", "action": "ALLOW", "protocols": ["tcp"], "dst_ports": ["80"]}]},
 "dns": {"lists": [{"name": "ads", "names": ["ads.example"]}]},
 "dpi": {"rule_files": ["$WORK/http.yar"]}}
J
ctl --json events --types config --count 1 >"$WORK/config-event.json" 2>&1 &
EV_PID=$!
BG_PIDS+=("$EV_PID")
sleep 0.5
kill -HUP "$APP_PID"
wait_until grep -q "SIGHUP: applied" "$APP_LOG" || true
grep -q "SIGHUP: applied $CFG as config version 2 (generation 2)" "$APP_LOG" || fail "no SIGHUP apply in the log"
ctl config get >"$WORK/get.json"
[[ $(jq_py "$WORK/get.json" 'd["version"]') == 2 ]] || fail "version after SIGHUP"
[[ $(jq_py "$WORK/get.json" 'd["firewall"]["rules"][1]["id"]') == no-syslog ]] || fail "SIGHUP did not apply the file"
curl -sf "http://$METRICS/metrics" -o "$WORK/m2.txt"
grep -q '^dpu_config_version 2$' "$WORK/m2.txt" || fail "config_version after SIGHUP: $(grep config_version "$WORK/m2.txt")"
grep -q '^dpu_config_applies_total{result="applied"} 1$' "$WORK/m2.txt" || fail "applies after SIGHUP"
grep -q '^dpu_config_apply_duration_seconds_count 1$' "$WORK/m2.txt" || fail "apply histogram"
wait "$EV_PID" || fail "dpuctl events: $(cat "$WORK/config-event.json")"
grep -q '"type": *"config"' "$WORK/config-event.json" || fail "no config event on WatchEvents: $(cat "$WORK/config-event.json")"
grep -q 'event_type.*config.*version.*:2,.*generation.*:2,.*duration_ms' "$WORK/config-event.json" \
  || fail "config event JSON: $(cat "$WORK/config-event.json")"
echo '{"firewall": {"rules": [{"id": "bad", "action": "DENY", "dst_ports": ["99999"]}]}}' >"$CFG"
ctl --json events --types config --count 1 >"$WORK/refused-event.json" 2>&1 &
EV_PID=$!
BG_PIDS+=("$EV_PID")
sleep 0.5
kill -HUP "$APP_PID"
wait_until grep -q "not applied" "$APP_LOG" || true
grep -q "SIGHUP: $CFG not applied, nothing changed" "$APP_LOG" || fail "invalid file on SIGHUP not reported"
grep -q "error: .*99999" "$APP_LOG" || fail "the error is not listed: $(tail -5 "$APP_LOG")"
kill -0 "$APP_PID" || fail "appliance died on an invalid SIGHUP config"
ctl config get >"$WORK/get.json"
[[ $(jq_py "$WORK/get.json" 'd["version"]') == 2 ]] || fail "an invalid file changed the version"
curl -sf "http://$METRICS/metrics" -o "$WORK/m3.txt" || fail "scrape failed"
grep -q '^dpu_config_applies_total{result="invalid"} 1$' "$WORK/m3.txt" || fail "invalid apply not counted"
# --- ops --- the refusal is a config event (WatchEvents) and counted by phase
grep -q '^dpu_config_refused_total{phase="validate"} 1$' "$WORK/m3.txt" || fail "refusal not counted by phase: $(grep refused "$WORK/m3.txt")"
wait "$EV_PID" || fail "dpuctl events: $(cat "$WORK/refused-event.json")"
$PY - "$WORK/refused-event.json" <<'PYEOF' || fail "refused config event: $(cat "$WORK/refused-event.json")"
import json, sys
e = json.load(open(sys.argv[1]))
c = e["config"]
assert e["type"] == "config" and c["result"] == "refused", e
assert c["phase"] == "validate" and c["code"] == "INVALID_ARGUMENT", c
assert int(c["based_on_version"]) == 2 and int(c["error_count"]) >= 1, c
assert "99999" in c["errors"][0]["reason"], c
j = json.loads(e["json"])
assert j["event_type"] == "config" and j["config"]["result"] == "refused", j
assert j["config"]["version"] == 2 and j["config"]["phase"] == "validate", j
PYEOF
pass "SIGHUP re-applies --config; an invalid file changes nothing"

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
APP_LOG=$WORK/unit.log
"${START[@]}" >"$WORK/unit.out" 2>"$APP_LOG" &
APP_PID=$!
APP_PIDS+=("$APP_PID")
unit_started() { grep -q "forwarding between" "$APP_LOG" 2>/dev/null || { kill -0 "$APP_PID" || fail "unit ExecStart exited"; return 1; }; }
wait_until unit_started || true
grep -q "forwarding between" "$APP_LOG" || fail "unit ExecStart did not start"
[[ -S $WORK/unit-state/api.sock ]] || fail "no API socket in DPU_STATE_DIR"
[[ $($PY "$(dirname "$0")/systemd_unit.py" "$UNIT" "$ENVF" ExecReload count) == 2 ]] || fail "ExecReload lines"
sed -i 's/"keep_established_on_change": true/"keep_established_on_change": false/' "$WORK/unit-config.json"
grep -q '"keep_established_on_change": false' "$WORK/unit-config.json" || fail "could not edit the unit's config"
for n in 0 1; do
  unit_cmd RELOAD ExecReload $n "MAINPID=$APP_PID"
  [[ ${RELOAD[0]} == /bin/kill ]] && RELOAD[0]=kill
  "${RELOAD[@]}" >"$WORK/reload.out" 2>&1 || fail "ExecReload[$n] failed: $(cat "$WORK/reload.out")"
done
wait_until grep -q "SIGHUP: applied" "$APP_LOG" || true
grep -q "SIGHUP: applied $WORK/unit-config.json as config version 2" "$APP_LOG" || fail "systemctl reload did not apply the file"
wait_until grep -q '"event_type":"config"' "$WORK/unit-eve.json" || true
grep -q '"event_type":"config","config":{"version":2,"generation":2,"duration_ms":' "$WORK/unit-eve.json" \
  || fail "the reload is not a config event in the events file"
# --- ops --- SIGHUP with an invalid file (the unit's kill line alone: `systemctl reload`
# would stop at its validate line): refused, and a config event in the events file
cp "$WORK/unit-config.json" "$WORK/unit-config.good"
echo '{"dataplane": {"flow_table": {"capacity_per_worker": 1}}}' >"$WORK/unit-config.json"
unit_cmd RELOAD ExecReload 1 "MAINPID=$APP_PID"
[[ ${RELOAD[0]} == /bin/kill ]] && RELOAD[0]=kill
"${RELOAD[@]}" >"$WORK/reload.out" 2>&1 || fail "ExecReload[1] failed: $(cat "$WORK/reload.out")"
wait_until grep -q '"result":"refused"' "$WORK/unit-eve.json" || true
grep -q '"event_type":"config","config":{"result":"refused","version":2,"based_on_version":2,"phase":"validate","code":"INVALID_ARGUMENT"' "$WORK/unit-eve.json" \
  || fail "the refused reload is not a config event in the events file: $(grep '"config"' "$WORK/unit-eve.json")"
cp "$WORK/unit-config.good" "$WORK/unit-config.json"
"$DPUCTL" --server "unix:$WORK/unit-state/api.sock" config get >"$WORK/unit-get.json"
[[ $(jq_py "$WORK/unit-get.json" 'd["firewall"].get("keep_established_on_change", False)') == False ]] \
  || fail "the reloaded file is not the committed config"
stop_appliance
grep -q "final counters" "$WORK/unit.out" || fail "no final counters on stop"
if command -v systemd-analyze >/dev/null; then
  sed "s|/usr/local/bin/dpu-appliance|$(realpath "$APPLIANCE")|g; s|EnvironmentFile=.*|EnvironmentFile=$ENVF|" "$UNIT" >"$WORK/dpu-appliance.service"
  systemd-analyze verify "$WORK/dpu-appliance.service" >"$WORK/verify.out" 2>&1 || fail "systemd-analyze verify: $(cat "$WORK/verify.out")"
  [[ ! -s $WORK/verify.out ]] || fail "systemd-analyze verify: $(cat "$WORK/verify.out")"
fi
pass "examples/systemd unit: validate, start, reload (SIGHUP applies the file), stop"
