#!/usr/bin/env bash
# A full or read-only state directory. The appliance runs in a private mount namespace
# (unshare -m) whose state directory is a small tmpfs; the test fills it up (nsenter) or
# remounts it read-only, then applies:
#  - the apply fails with an error naming the file and the cause (ENOSPC / EROFS), dpuctl
#    exits 1, nothing is committed (version and content unchanged, no config.json.tmp left,
#    config.json still the last committed document);
#  - the dataplane keeps forwarding with the last committed config (explain shows its
#    verdict, rx counters advance);
#  - once space is back / the directory is writable again, the next apply commits.
# Also: starting with --config on a read-only empty state directory fails with a clear error.
# Needs root and mount namespaces (prints SKIPPED otherwise).
source "$(dirname "$0")/common.sh" "$@"
command -v unshare >/dev/null && command -v nsenter >/dev/null || skip "unshare/nsenter missing (util-linux)"
unshare -m --propagation private sh -c "mount -t tmpfs -o size=64k tmpfs '$WORK' && umount '$WORK'" \
  2>/dev/null || skip "cannot mount a tmpfs in a private mount namespace here (needs root/CAP_SYS_ADMIN)"

STATE=$WORK/state
mkdir -p "$STATE"
REAL_APPLIANCE=$APPLIANCE
APPLIANCE=$WORK/in_namespace.sh
cat >"$APPLIANCE" <<W
#!/bin/sh
# dpu-appliance in its own mount namespace, state directory on a 256 KiB tmpfs.
exec unshare -m --propagation private sh -c 'mount -t tmpfs -o size=256k,mode=0700 tmpfs "$STATE" && exec "\$0" "\$@"' "$REAL_APPLIANCE" "\$@"
W
chmod +x "$APPLIANCE"
SOCK=$WORK/api.sock
in_ns() { nsenter -t "$APP_PID" -m -- "$@"; }

start_appliance "$STATE" --listen "unix:$SOCK"
in_ns grep -q " $STATE tmpfs" /proc/mounts || fail "state directory is not the namespace's tmpfs"
ctl config set dataplane.non_ip=DROP >/dev/null || fail "first apply"
ver() { ctl --json config get | $PY -c 'import json,sys; print(int(json.load(sys.stdin)["config"]["version"]))'; }
[[ $(ver) == 2 ]] || fail "version after the first apply"
ARP=ffffffffffff020000000001080600010800060400010200000000010a0000010000000000000a000002
rx() { ctl --json stats | $PY -c 'import json,sys; d=json.load(sys.stdin); print(sum(int(p.get("rx_packets",p.get("rxPackets",0))) for p in d.get("ports",[])))'; }

# A config larger than one page, so a write can fail half-way.
big_cfg() {
  $PY - "$1" <<'P'
import json, sys
rules = [{"id": "r%d" % i, "action": "ALLOW", "protocols": ["tcp"], "dst": ["10.%d.%d.0/24" % (i // 256, i % 256)], "dst_ports": ["%d" % (1000 + i)]} for i in range(300)]
json.dump({"dataplane": {"non_ip": "FORWARD"}, "firewall": {"rules": rules}}, open(sys.argv[1], "w"))
P
}
big_cfg "$WORK/big.json"
[[ $(stat -c %s "$WORK/big.json") -gt 8192 ]] || fail "test config too small"

# expect_refused WHAT CAUSE: the apply of big.json fails naming config.json.tmp and CAUSE;
# nothing changed; still forwarding with non_ip=DROP.
expect_refused() {
  local what=$1 cause=$2 rc=0 before after
  before=$(in_ns cat "$STATE/config.json") || fail "$what: cannot read config.json"
  ctl config apply "$WORK/big.json" --force >"$WORK/apply.out" 2>"$WORK/apply.err" || rc=$?
  ((rc == 1)) || fail "$what: dpuctl config apply exited $rc (want 1): $(cat "$WORK/apply.out" "$WORK/apply.err")"
  grep -q "config.json.tmp" "$WORK/apply.err" && grep -qi "$cause" "$WORK/apply.err" ||
    fail "$what: the error does not name the file and '$cause': $(cat "$WORK/apply.err")"
  [[ $(ver) == 2 ]] || fail "$what: committed version moved to $(ver)"
  after=$(in_ns cat "$STATE/config.json")
  [[ $before == "$after" ]] || fail "$what: config.json changed"
  in_ns test ! -e "$STATE/config.json.tmp" || fail "$what: config.json.tmp left behind"
  ctl explain --frame-hex "$ARP" | grep -q "reason non_ip" || fail "$what: the dataplane no longer runs the committed config"
  local a b
  a=$(rx); sleep 0.5; b=$(rx)
  ((b > a)) || fail "$what: forwarding stopped (rx $a -> $b)"
  pass "$what: apply refused ($(head -c 200 "$WORK/apply.err" | tr '\n' ' ')), version 2 and forwarding kept"
}

# 1. Full: fill the tmpfs, then free one page so the write fails part-way.
in_ns sh -c "dd if=/dev/zero of='$STATE/fill' bs=4096 2>/dev/null; truncate -s -4096 '$STATE/fill'" || true
expect_refused "full state directory" "no space left"
in_ns rm -f "$STATE/fill"
ctl config apply "$WORK/big.json" --force >/dev/null || fail "apply after space came back"
[[ $(ver) == 3 ]] || fail "version after space came back"
pass "space back: the apply commits (version 3)"

# 2. Read-only: back to version 2's content first (smaller), then remount ro.
ctl config set dataplane.non_ip=DROP >/dev/null || fail "apply non_ip=DROP"
ctl config set firewall.rules=[] >/dev/null 2>&1 || true
in_ns mount -o remount,ro "$STATE" || fail "remount ro"
v_ro=$(ver)
before=$(in_ns cat "$STATE/config.json")
rc=0
ctl config apply "$WORK/big.json" --force >"$WORK/apply.out" 2>"$WORK/apply.err" || rc=$?
((rc == 1)) || fail "read-only: dpuctl exited $rc"
grep -qi "read-only file system" "$WORK/apply.err" || fail "read-only: unclear error: $(cat "$WORK/apply.err")"
[[ $(ver) == "$v_ro" ]] || fail "read-only: version moved"
[[ $(in_ns cat "$STATE/config.json") == "$before" ]] || fail "read-only: config.json changed"
ctl explain --frame-hex "$ARP" | grep -q "reason non_ip" || fail "read-only: dataplane config changed"
a=$(rx); sleep 0.5; b=$(rx); ((b > a)) || fail "read-only: forwarding stopped"
pass "read-only state directory: apply refused ($(head -c 160 "$WORK/apply.err" | tr '\n' ' ')), version $v_ro kept"
in_ns mount -o remount,rw "$STATE" || fail "remount rw"
ctl config apply "$WORK/big.json" --force >/dev/null || fail "apply after remount rw"
[[ $(ver) == $((v_ro + 1)) ]] || fail "version after remount rw"
pass "writable again: the apply commits"
stop_appliance

# 3. Start-up on a read-only, empty state directory with --config: a clear error, exit 1.
echo '{}' >"$WORK/seed.json"
rc=0
unshare -m --propagation private sh -c "mount -t tmpfs -o size=64k,ro tmpfs '$STATE' && exec \"\$0\" \"\$@\"" \
  "$REAL_APPLIANCE" run --state-dir "$STATE" --listen "unix:$SOCK" --config "$WORK/seed.json" -- \
  -l 0,1 --no-huge --no-pci --no-shconf --file-prefix="dpuit_${TEST_NAME}_$$_ro" -m 1024 \
  --log-level=lib.eal:error --vdev "net_pcap0,rx_pcap=$PCAP" --vdev net_null0,no-rx=1 \
  >"$WORK/ro.out" 2>"$WORK/ro.err" || rc=$?
((rc == 1)) || fail "start on a read-only state directory: exit $rc (want 1): $(tail -5 "$WORK/ro.err")"
grep -qi "read-only file system" "$WORK/ro.err" || fail "start on a read-only state directory: unclear error: $(cat "$WORK/ro.err")"
pass "start-up on a read-only empty state directory: $(grep -i 'read-only' "$WORK/ro.err" | head -1)"
echo "PASS $TEST_NAME"
