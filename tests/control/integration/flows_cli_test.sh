#!/usr/bin/env bash
# --- flows view / capture --- dpuctl flows and dpuctl capture against the real appliance
# (net_pcap replaying a capture forever): the flows of the capture listed with their cached
# verdict and rule, filters, sort, paging, errors naming the field (exit 4), top talkers over
# a window, and captures of dropped / rule-judged packets written to pcap files that scapy
# reads back with exactly the expected packets.
source "$(dirname "$0")/common.sh" "$@"

# Our own capture: a TCP connection to :80, a denied SSH SYN, UDP to :53 (three times the
# bytes of the others), an ICMP echo; IPv6 UDP.
$PY - "$PCAP" <<'PYEOF'
import sys
from scapy.all import Ether, IP, IPv6, TCP, UDP, ICMP, Raw, wrpcap
a, b = "02:00:00:00:00:01", "02:00:00:00:00:02"
pk = [
    Ether(src=a, dst=b) / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=40000, dport=80, flags="S"),
    Ether(src=a, dst=b) / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=40000, dport=80, flags="A") / Raw(b"GET / HTTP/1.1\r\n\r\n"),
    Ether(src=a, dst=b) / IP(src="10.0.0.66", dst="192.0.2.22") / TCP(sport=41000, dport=22, flags="S"),
    Ether(src=a, dst=b) / IP(src="10.0.0.3", dst="10.0.0.53") / UDP(sport=5000, dport=53) / Raw(b"q" * 300),
    Ether(src=a, dst=b) / IP(src="10.0.0.5", dst="10.0.0.6") / ICMP(id=7),
    Ether(src=a, dst=b) / IPv6(src="2001:db8::1", dst="2001:db8:1::2") / UDP(sport=6000, dport=123) / Raw(b"n" * 48),
]
wrpcap(sys.argv[1], pk)
PYEOF

mkdir -p "$WORK/etc"
cat >"$WORK/etc/site.rules" <<'R'
deny tcp any any -> 192.0.2.0/24 22 id ssh-block
allow tcp any any -> any 80 id web
R
echo '{"firewall": {"rule_files": ["site.rules"]}}' >"$WORK/etc/dpu.json"
start_appliance "$WORK/state" --config "$WORK/etc/dpu.json"

# --- every flow of the capture, with verdicts and rules
has_flows() { ctl --json flows >"$WORK/all.json" 2>/dev/null && [[ $(jq_py "$WORK/all.json" 'len(d.get("flows", []))') -ge 5 ]]; }
wait_until has_flows || fail "flows: the capture's 5 flows never showed up: $(cat "$WORK/all.json")"
[[ $(jq_py "$WORK/all.json" 'len(d["flows"])') == 5 ]] || fail "flows: want 5: $(cat "$WORK/all.json")"
[[ $(jq_py "$WORK/all.json" 'sorted(f.get("dest_port", 0) for f in d["flows"] if f["proto"] != "ICMP")') == "[22, 53, 80, 123]" ]] ||
  fail "flows: ports: $(cat "$WORK/all.json")"
ctl --json flows --dport 22 >"$WORK/ssh.json" || fail "flows --dport 22"
[[ $(jq_py "$WORK/ssh.json" '[(f["src_ip"], f["verdict"], f["stage"], f["rule"], f["state"]) for f in d["flows"]]') == \
   "[('10.0.0.66', 'drop', 'firewall', 'ssh-block', 'syn_sent')]" ]] || fail "flows --dport 22: $(cat "$WORK/ssh.json")"
ctl --json flows --rule web >"$WORK/web.json" || fail "flows --rule web"
[[ $(jq_py "$WORK/web.json" '[(f["src_ip"], f["src_port"], f["dest_ip"], f["verdict"]) for f in d["flows"]]') == \
   "[('10.0.0.1', 40000, '10.0.0.2', 'forward')]" ]] || fail "flows --rule web: $(cat "$WORK/web.json")"
ctl flows >"$WORK/table.txt" || fail "flows (table)"
grep -q "10.0.0.66:41000 .*192.0.2.22:22 .*syn_sent .*drop/firewall .*ssh-block" "$WORK/table.txt" ||
  fail "flows table: $(cat "$WORK/table.txt")"
grep -q "5 of 5 matching flows shown" "$WORK/table.txt" || fail "flows table footer: $(cat "$WORK/table.txt")"
pass "every flow, with verdict, stage and rule"

# --- filters, sort, paging
n() { ctl --json flows "$@" >"$WORK/f.json" || fail "flows $*"; jq_py "$WORK/f.json" 'len(d.get("flows", []))'; }
[[ $(n --proto udp) == 2 ]] || fail "--proto udp: $(cat "$WORK/f.json")"
[[ $(n --address 10.0.0.0/24) == 4 ]] || fail "--address 10.0.0.0/24: $(cat "$WORK/f.json")"
[[ $(n --src 2001:db8::/64) == 1 ]] || fail "--src 2001:db8::/64: $(cat "$WORK/f.json")"
[[ $(n --dst 10.0.0.53 --port 5000) == 1 ]] || fail "--dst --port: $(cat "$WORK/f.json")"
# No answers come back (net_null): both TCP flows wait in syn_sent.
[[ $(n --proto tcp --state syn_sent) == 2 ]] || fail "--state syn_sent: $(cat "$WORK/f.json")"
[[ $(n --state established) == 0 ]] || fail "--state established: $(cat "$WORK/f.json")"
[[ $(n --verdict drop) == 1 ]] || fail "--verdict drop: $(cat "$WORK/f.json")"
[[ $(n --backend web-1) == 0 ]] || fail "--backend: $(cat "$WORK/f.json")"
ctl --json flows --sort bytes --limit 1 >"$WORK/top.json" || fail "--sort bytes"
[[ $(jq_py "$WORK/top.json" '(d["flows"][0]["dest_port"], d["matched"])') == "(53, '5')" ]] ||
  fail "--sort bytes --limit 1: $(cat "$WORK/top.json")"
p1=$(ctl --json flows --sort age --limit 2 | $PY -c 'import json,sys; print([f["flow_id"] for f in json.load(sys.stdin)["flows"]])')
p2=$(ctl --json flows --sort age --limit 2 --offset 2 | $PY -c 'import json,sys; print([f["flow_id"] for f in json.load(sys.stdin)["flows"]])')
p3=$(ctl --json flows --sort age --limit 2 --offset 4 | $PY -c 'import json,sys; print([f["flow_id"] for f in json.load(sys.stdin)["flows"]])')
$PY -c 'import sys; a=[eval(x) for x in sys.argv[1:]]; ids=sum(a, []); sys.exit(0 if [len(x) for x in a]==[2,2,1] and len(set(ids))==5 else 1)' "$p1" "$p2" "$p3" ||
  fail "paging by age: $p1 / $p2 / $p3"
rc=0; ctl flows --src 10.0.0.300 2>"$WORK/bad.err" || rc=$?
[[ $rc -eq 4 ]] || fail "flows --src 10.0.0.300: rc $rc"
grep -q "filter.src: '10.0.0.300'" "$WORK/bad.err" || fail "bad filter error: $(cat "$WORK/bad.err")"
rc=0; ctl flows --state open 2>"$WORK/bad2.err" || rc=$?
[[ $rc -eq 4 ]] && grep -q "established" "$WORK/bad2.err" || fail "flows --state open: rc $rc $(cat "$WORK/bad2.err")"
rc=0; ctl flows --window 2 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "flows --window without --top: rc $rc"
pass "filters, sort, paging, errors"

# --- top talkers: the capture replays forever, so every flow moves within a window
ctl --json flows --top 2 --by bytes --window 0.5 >"$WORK/talk.json" || fail "flows --top"
[[ $(jq_py "$WORK/talk.json" 'len(d["flows"])') == 2 ]] || fail "--top 2: $(cat "$WORK/talk.json")"
[[ $(jq_py "$WORK/talk.json" 'd["flows"][0]["dest_port"]') == 53 ]] || fail "--top by bytes: $(cat "$WORK/talk.json")"
[[ $(jq_py "$WORK/talk.json" 'int(d["flows"][0]["window_bytes"]) > 0 and d["flows"][0]["bits_per_second"] > 0 and int(d["window_ms"]) >= 400') == True ]] ||
  fail "--top rates: $(cat "$WORK/talk.json")"
ctl flows --top 3 --window 0.2 >"$WORK/talk.txt" || fail "flows --top (table)"
grep -q "PPS" "$WORK/talk.txt" && grep -q "3 of 5 matching flows shown" "$WORK/talk.txt" || fail "top table: $(cat "$WORK/talk.txt")"
pass "top talkers over a window"

# --- capture: drops to a pcap, then packets judged by a rule
ctl capture --drops --count 5 -w "$WORK/drops.pcap" >"$WORK/cap.out" 2>"$WORK/cap.err" || fail "capture --drops: $(cat "$WORK/cap.err")"
grep -q "captured 5 packets" "$WORK/cap.err" || fail "capture summary: $(cat "$WORK/cap.err")"
[[ $(wc -l <"$WORK/cap.out") == 5 ]] && grep -q "drop firewall firewall_deny" "$WORK/cap.out" || fail "capture lines: $(cat "$WORK/cap.out")"
check_pcap() {  # FILE N SRC DPORT: N frames, all TCP from SRC to DPORT, ns timestamps near now
  $PY - "$@" <<'PYEOF'
import sys, time
from scapy.all import PcapNgReader, RawPcapReader, Ether, IP, TCP
f, n, src, dport = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
r = RawPcapReader(f)
assert r.linktype == 1, r.linktype
frames = list(r)
assert len(frames) == n, len(frames)
for data, meta in frames:
    p = Ether(data)
    assert p[IP].src == src and p[TCP].dport == dport, p.summary()
    assert meta.wirelen == len(data), (meta.wirelen, len(data))
    ts = meta.sec + meta.usec / 1e9  # nanosecond file: "usec" holds nanoseconds
    assert abs(ts - time.time()) < 3600, ts
PYEOF
}
check_pcap "$WORK/drops.pcap" 5 10.0.0.66 22 || fail "drops.pcap"
ctl capture --drops --reason firewall_deny --count 2 --quiet -w "$WORK/deny.pcap" 2>/dev/null || fail "capture --reason"
check_pcap "$WORK/deny.pcap" 2 10.0.0.66 22 || fail "deny.pcap"
ctl capture --rule web --count 4 --quiet -w "$WORK/web.pcap" 2>/dev/null || fail "capture --rule web"
check_pcap "$WORK/web.pcap" 4 10.0.0.1 80 || fail "web.pcap"
# No drop of that reason in this traffic: the duration ends the capture, empty but valid.
ctl capture --drops --reason dns_answered --duration 0.5 --quiet -w "$WORK/none.pcap" 2>/dev/null || fail "capture --duration"
check_pcap "$WORK/none.pcap" 0 x 0 || fail "none.pcap"
rc=0; ctl capture --rule nope --count 1 -w "$WORK/x.pcap" 2>"$WORK/nope.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q "NOT_FOUND.*no firewall rule 'nope'" "$WORK/nope.err" || fail "capture --rule nope: rc $rc $(cat "$WORK/nope.err")"
rc=0; ctl capture --drops --reason bogus --count 1 -w "$WORK/x.pcap" 2>"$WORK/reason.err" || rc=$?
[[ $rc -eq 4 ]] && grep -q "firewall_deny" "$WORK/reason.err" || fail "capture --reason bogus: rc $rc $(cat "$WORK/reason.err")"
rc=0; ctl capture --count 1 -w "$WORK/x.pcap" 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "capture without --drops / --rule: rc $rc"
pass "capture to pcap (drops, one reason, one rule)"

stop_appliance
pass "stopped cleanly"
