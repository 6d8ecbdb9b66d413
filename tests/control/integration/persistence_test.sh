#!/usr/bin/env bash
# What a restart keeps:
#  1. apply, kill -9, restart on the same state directory: the committed version and content
#     are the last acknowledged ones (and a --config given at restart does not override them).
#  2. kill -9 in the middle of a stream of applies (each `config set` sets a distinct value):
#     after restart the config is either the last acknowledged one or the one that was in
#     flight (version + 1 with the next value), never anything else, never a torn file.
source "$(dirname "$0")/common.sh" "$@"

STATE=$WORK/state
start_appliance "$STATE"
cat >"$WORK/cfg.json" <<'J'
{"dataplane": {"non_ip": "DROP", "timeouts": {"udp_s": 31, "tcp_established_s": 600},
               "flow_table": {"when_full": "DROP"}}}
J
ctl --json config apply "$WORK/cfg.json" >"$WORK/ack.json" || fail "apply"
[[ $(jq_py "$WORK/ack.json" 'd["version"]') == 2 ]] || fail "apply: $(cat "$WORK/ack.json")"
ctl config get >"$WORK/before.json"
kill9_appliance

echo '{"dataplane": {"non_ip": "FORWARD"}}' >"$WORK/seed.json"
start_appliance "$STATE" --config "$WORK/seed.json"
grep -q "only seeds an empty state directory" "$APP_LOG" || fail "no note that --config was not used"
ctl config get >"$WORK/after.json"
cmp -s "$WORK/before.json" "$WORK/after.json" ||
  fail "config changed across kill -9: $(diff "$WORK/before.json" "$WORK/after.json")"
ctl --json status >"$WORK/st.json"
[[ $(jq_py "$WORK/st.json" 'd["config_version"]') == 2 ]] || fail "status version after restart"
ctl explain --frame-hex ffffffffffff020000000001080600010800060400010200000000010a0000010000000000000a000002 |
  grep -q "reason non_ip" || fail "restarted dataplane does not run the committed config"
pass "kill -9 after an acknowledged apply: version and content kept"

# A fresh state directory is seeded from --config.
kill9_appliance
start_appliance "$WORK/fresh" --config "$WORK/seed.json"
ctl config get >"$WORK/fresh.json"
[[ $(jq_py "$WORK/fresh.json" 'd["version"]') == 1 ]] || fail "seeded version"
[[ $(jq_py "$WORK/fresh.json" 'd["dataplane"]["non_ip"]') == FORWARD ]] || fail "seed content"
kill9_appliance
pass "--config seeds an empty state directory"

# kill -9 during a stream of applies, three rounds.
for round in 1 2 3; do
  start_appliance "$STATE"
  base=$(ctl --json config get | $PY -c 'import json,sys; print(int(json.load(sys.stdin)["config"]["version"]))')
  acked=$WORK/acked.$round
  : >"$acked"
  (
    # Each `config set` carries a value unique in this round: 1000*round + i.
    for ((i = 1; i <= 5000; i++)); do
      v=$((1000 * round + i))
      out=$("$DPUCTL" --server "$APP_ADDR" --json config set "dataplane.timeouts.udp_s=$v" 2>/dev/null) || exit 0
      ver=$(echo "$out" | $PY -c 'import json,sys; print(int(json.load(sys.stdin)["version"]))')
      echo "$ver $v" >>"$acked"
    done
  ) &
  writer=$!
  BG_PIDS+=("$writer")
  # Let some applies through, then kill at a moment unrelated to the writer's pace.
  for ((i = 0; i < 100; i++)); do
    [[ $(wc -l <"$acked") -ge $((10 * round)) ]] && break
    sleep 0.1
  done
  sleep "0.$((RANDOM % 9 + 1))"
  kill9_appliance
  wait "$writer" || true
  n=$(wc -l <"$acked")
  [[ $n -ge 1 ]] || fail "round $round: no apply was acknowledged before the kill"
  read -r last_ver last_val < <(tail -n 1 "$acked")
  [[ $last_ver -eq $((base + n)) ]] || fail "round $round: acknowledged versions are not consecutive"
  $PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$STATE/config.json" ||
    fail "round $round: config.json is not valid JSON after kill -9"

  start_appliance "$STATE"
  ctl --json config get >"$WORK/r.json"
  got_ver=$(jq_py "$WORK/r.json" 'int(d["config"]["version"])')
  got_val=$(jq_py "$WORK/r.json" 'd["config"]["dataplane"]["timeouts"]["udp_s"]')
  if [[ $got_ver -eq $last_ver && $got_val -eq $last_val ]]; then
    outcome="last acknowledged"
  elif [[ $got_ver -eq $((last_ver + 1)) && $got_val -eq $((last_val + 1)) ]]; then
    outcome="the one in flight"
  else
    fail "round $round: restarted with version $got_ver udp_s $got_val; last acknowledged was version $last_ver udp_s $last_val"
  fi
  # The other fields of the document are intact (not torn / mixed).
  [[ $(jq_py "$WORK/r.json" 'd["config"]["dataplane"]["non_ip"]') == DROP ]] || fail "round $round: non_ip lost"
  [[ $(jq_py "$WORK/r.json" 'd["config"]["dataplane"]["timeouts"]["tcp_established_s"]') == 600 ]] ||
    fail "round $round: tcp_established_s lost"
  [[ ! -e $STATE/config.json.tmp ]] || fail "round $round: config.json.tmp left after start"
  kill9_appliance
  pass "round $round: $n applies acknowledged, killed; restart has version $got_ver ($outcome)"
done
echo "PASS $TEST_NAME"
