#!/usr/bin/env bash
# Config apply benchmark (issue 3): latency of `dpuctl config apply` against a running
# dpu-appliance that forwards full-rate replayed traffic, and packets lost to the applies.
#
# Set-up (as bench/fwd_bench.sh): lcores 0,1 (main = control + gRPC, 1 = worker), EAL
# --no-huge, a private, fresh --state-dir (OUTDIR/state; default OUTDIR: a new /tmp/apply_bench.*), and
#   port 0 = net_pcap0,rx_pcap=PCAP,infinite_rx=1   (bench/gen_traffic.py, 8192 flows)
#   port 1 = net_null0,no-rx=1
#
# Measurements (each apply is `dpuctl --json config apply FILE --force`, one process per call):
#  (a) N_EMPTY applies of the empty config ({}): median and p99 of the server-side phases from
#      the ApplyConfigResponse (validate_ms, compile_ms, prepare_ms when the server reports it,
#      persist_ms, publish_ms), their sum, and the client wall time of the dpuctl call
#      (process start, connect, request, response).
#  (b) N_FW applies each of a firewall config with 1k and 10k generated rules (a text rule
#      file, docs/firewall.md; deny rules on 192.168.0.0/16 -> 198.18.0.0/15, which the
#      traffic (10/8 -> 172.16/12) never matches). Consecutive applies alternate between two
#      rule files of the same size (different ports) so that every apply really changes the
#      rule set; the first apply (from empty) is included.
#  (c) N_LOSS applies under traffic alternating the empty config and the 1k-rule config;
#      `dpuctl --json stats` before and after: rx_missed, rx_nombuf, tx_errors per port,
#      drops by reason (none is intended: the rules never match), and rx = forwarded +
#      dropped. Target: 0 lost.
#
# usage: bench/apply_bench.sh [-o OUTDIR] [-f FLOWS] [--empty N] [--fw N] [--loss N]
#                             [--sizes 1000,10000] [--appliance BIN] [--dpuctl BIN] [--nice N]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
source "$HERE/eal_dirs.sh"
PY=/usr/bin/python3

OUTDIR=""
FLOWS=8192
N_EMPTY=50
N_FW=8
N_LOSS=100
SIZES="1000,10000"
APP="$ROOT/build/control/dpu-appliance"
CTL="$ROOT/build/control/dpuctl"
NICE=""

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit "${1:-0}"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o) OUTDIR="$2"; shift 2 ;;
    -f) FLOWS="$2"; shift 2 ;;
    --empty) N_EMPTY="$2"; shift 2 ;;
    --fw) N_FW="$2"; shift 2 ;;
    --loss) N_LOSS="$2"; shift 2 ;;
    --sizes) SIZES="$2"; shift 2 ;;
    --appliance) APP="$2"; shift 2 ;;
    --dpuctl) CTL="$2"; shift 2 ;;
    --nice) NICE="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "apply_bench: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
die() { echo "apply_bench: $*" >&2; exit 1; }
[[ -x "$APP" ]] || die "appliance binary not found: $APP"
[[ -x "$CTL" ]] || die "dpuctl not found: $CTL"

if [[ -z "$OUTDIR" ]]; then OUTDIR="$(mktemp -d /tmp/apply_bench.XXXXXX)"; fi
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
# Private copies: the build tree may be rebuilt while the benchmark runs.
cp "$APP" "$OUTDIR/dpu-appliance"; cp "$CTL" "$OUTDIR/dpuctl"
APP_SRC="$APP"; APP="$OUTDIR/dpu-appliance"; CTL="$OUTDIR/dpuctl"
STATE="$OUTDIR/state"
rm -rf "$STATE"; mkdir -m 700 "$STATE"
NICE_CMD=""; [[ -z "$NICE" ]] || NICE_CMD="nice -n $NICE"

PCAP="$OUTDIR/traffic_${FLOWS}.pcap"
"$PY" "$HERE/gen_traffic.py" -o "$PCAP" --flows "$FLOWS" >"$OUTDIR/gen.txt"

# --- configs --------------------------------------------------------------------------
echo '{}' >"$OUTDIR/empty.json"
gen_rules() {  # $1 count, $2 variant (0/1), $3 file (+ its .json config)
  "$PY" "$HERE/gen_rules.py" "$1" "$2" "$3"
}
IFS=, read -r -a SIZE_LIST <<<"$SIZES"
for n in "${SIZE_LIST[@]}"; do
  for v in 0 1; do gen_rules "$n" "$v" "$OUTDIR/fw_${n}_$v.rules"; done
done
[[ " ${SIZE_LIST[*]} " == *" 1000 "* ]] || for v in 0 1; do gen_rules 1000 "$v" "$OUTDIR/fw_1000_$v.rules"; done

# --- appliance --------------------------------------------------------------------------
APP_LOG="$OUTDIR/appliance.err"; APP_OUT="$OUTDIR/appliance.out"
eal_dirs_track "applyb_$$"
$NICE_CMD "$APP" run --state-dir "$STATE" -- \
  -l 0,1 --no-huge --no-pci --no-shconf --file-prefix="applyb_$$" -m 1024 \
  --log-level=lib.eal:error \
  --vdev "net_pcap0,rx_pcap=$PCAP,infinite_rx=1" --vdev net_null0,no-rx=1 \
  >"$APP_OUT" 2>"$APP_LOG" &
APP_PID=$!
cleanup() {
  if kill -0 "$APP_PID" 2>/dev/null; then
    kill -TERM "$APP_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$APP_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$APP_PID" 2>/dev/null || true
  fi
  wait "$APP_PID" 2>/dev/null || true
  eal_dirs_cleanup
}
trap cleanup EXIT
for ((i = 0; i < 600; i++)); do
  if grep -q "API listening on" "$APP_LOG" 2>/dev/null && grep -q "forwarding between" "$APP_LOG"; then break; fi
  kill -0 "$APP_PID" 2>/dev/null || die "dpu-appliance exited during start-up, see $APP_LOG"
  sleep 0.1
done
ADDR=$(sed -n 's/^dpu-appliance: API listening on \([^ ]*\) .*/\1/p' "$APP_LOG" | head -1)
[[ -n "$ADDR" ]] || die "appliance did not start listening, see $APP_LOG"
ctl() { "$CTL" --server "$ADDR" "$@"; }

RES="$OUTDIR/applies.tsv"   # set, i, wall_ms, response JSON (one line)
: >"$RES"
apply_one() {  # $1 set name, $2 index, $3 file
  local t0 t1 out
  t0=$(date +%s%N)
  out=$(ctl --json config apply "$3" --force 2>"$OUTDIR/apply.err") ||
    die "apply $1 #$2 ($3) failed: $(cat "$OUTDIR/apply.err")"
  t1=$(date +%s%N)
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$(( (t1 - t0) / 1000 ))" "$(echo "$out" | tr -d '\n')" >>"$RES"
}

sleep 2   # let the flow table fill and the rate settle
echo "apply_bench: appliance pid $APP_PID, API $ADDR, pcap $PCAP ($FLOWS flows), logs in $OUTDIR"
echo "apply_bench: CPU $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg);" \
     "appliance $APP_SRC ($(date -r "$APP_SRC" '+%F %T'))"

# (a) empty config
for ((i = 1; i <= N_EMPTY; i++)); do apply_one empty "$i" "$OUTDIR/empty.json"; done
# (b) firewall configs
for n in "${SIZE_LIST[@]}"; do
  apply_one empty_reset 0 "$OUTDIR/empty.json"
  for ((i = 1; i <= N_FW; i++)); do apply_one "fw$n" "$i" "$OUTDIR/fw_${n}_$((i % 2)).json"; done
done
apply_one empty_reset 0 "$OUTDIR/empty.json"

# (c) loss during N_LOSS applies
sleep 1
ctl --json stats >"$OUTDIR/stats_before.json"
ctl --json status >"$OUTDIR/status_before.json"
tl0=$(date +%s%N)
for ((i = 1; i <= N_LOSS; i++)); do
  if ((i % 2)); then f="$OUTDIR/fw_1000_0.json"; else f="$OUTDIR/empty.json"; fi
  apply_one loss "$i" "$f"
done
tl1=$(date +%s%N)
ctl --json stats >"$OUTDIR/stats_after.json"
ctl --json status >"$OUTDIR/status_after.json"
sleep 1
ctl --json stats >"$OUTDIR/stats_after1s.json"

"$PY" - "$OUTDIR" "$RES" "$tl0" "$tl1" "$N_LOSS" <<'EOF'
import json, math, statistics, sys
out, res, tl0, tl1, nloss = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = []
for line in open(res):
    s, i, wall_us, js = line.rstrip("\n").split("\t", 3)
    rows.append((s, int(i), int(wall_us) / 1000.0, json.loads(js)))

def g(d, name):  # proto field in protobuf JSON: lowerCamel or original name
    camel = name.split("_")[0] + "".join(p.title() for p in name.split("_")[1:])
    return float(d.get(camel, d.get(name, 0.0)))

has_prepare = any(("prepareMs" in d or "prepare_ms" in d) for _, _, _, d in rows)
phases = ["validate_ms", "compile_ms"] + (["prepare_ms"] if has_prepare else []) + ["persist_ms", "publish_ms"]

def pct(v, p):  # nearest-rank percentile
    v = sorted(v)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]

cols = [p[:-3] for p in phases] + ["server", "dpuctl"]
hdr = f"{'config':<12} {'n':>3}  {'stat':<6}" + "".join(f"{c:>10}" for c in cols)
lines = [hdr]
md = ["| config | n | stat | " + " | ".join(f"{c} ms" for c in cols) + " |",
      "|---|---:|---|" + "---:|" * len(cols)]
summary = {}
for s in ["empty"] + sorted({r[0] for r in rows if r[0].startswith("fw")}, key=lambda x: int(x[2:])) + ["loss"]:
    sel = [r for r in rows if r[0] == s]
    if not sel:
        continue
    data = {p: [g(d, p) for _, _, _, d in sel] for p in phases}
    data["server"] = [sum(g(d, p) for p in phases) for _, _, _, d in sel]
    data["dpuctl"] = [w for _, _, w, _ in sel]
    keys = [p for p in phases] + ["server", "dpuctl"]
    label = {"empty": "empty", "loss": "loss run"}.get(s) or f"{int(s[2:]):,} rules".replace(",", " ")
    for stat, fn in (("median", statistics.median), ("p99", lambda v: pct(v, 99)), ("max", max)):
        vals = [fn(data[k]) for k in keys]
        lines.append(f"{label:<12} {len(sel):>3}  {stat:<6}" + "".join(f"{x:10.2f}" for x in vals))
        md.append(f"| {label} | {len(sel)} | {stat} | " + " | ".join(f"{x:.2f}" for x in vals) + " |")
    summary[s] = {k: statistics.median(data[k]) for k in keys}
print("\n".join(lines))

# versions must go up by one per apply
vers = [int(d.get("version", 0)) for _, _, _, d in rows]
mono = all(b == a + 1 for a, b in zip(vers, vers[1:]))

ld = lambda n: json.load(open(f"{out}/{n}"))
b, a, a1 = ld("stats_before.json"), ld("stats_after.json"), ld("stats_after1s.json")
st = ld("status_after.json")
U = lambda d, k: int(d.get(k, 0))
lost = {}
for pa in a["ports"]:
    pb = next((p for p in b["ports"] if p.get("side") == pa.get("side")), {})
    for k in ("rx_missed", "rx_nombuf", "tx_errors"):
        lost[f"port {pa.get('side')} {k}"] = U(pa, k) - U(pb, k)
db = {k: int(v) for k, v in b["total"].get("drops", {}).items()}
da = {k: int(v) for k, v in a["total"].get("drops", {}).items()}
for k in sorted(set(da) | set(db)):
    lost[f"drops[{k}]"] = da.get(k, 0) - db.get(k, 0)
tb, ta = b["total"], a["total"]
rx = U(ta, "rx_packets_a") + U(ta, "rx_packets_b") - U(tb, "rx_packets_a") - U(tb, "rx_packets_b")
fwd = U(ta, "forwarded") - U(tb, "forwarded")
dropped = U(ta, "dropped") - U(tb, "dropped")
txb = U(ta, "tx_packets_b") - U(tb, "tx_packets_b")
secs = (int(a["timestamp_unix_ns"]) - int(b["timestamp_unix_ns"])) / 1e9
workers_ok = all(U(w, "generation") == U(st, "generation") for w in st.get("workers", []))
total_lost = sum(v for v in lost.values() if v > 0)
# before the loss run: rate over the last second before (stats_before vs nothing) is not known;
# use the rate 1 s after as the undisturbed reference
rate_after = (U(a1["total"], "rx_packets_a") - U(ta, "rx_packets_a")) / \
             ((int(a1["timestamp_unix_ns"]) - int(a["timestamp_unix_ns"])) / 1e9)
print()
print(f"loss run: {nloss} applies (empty <-> 1k rules) in {(tl1 - tl0) / 1e9:.1f} s; "
      f"{rx} packets received in {secs:.1f} s ({rx / secs / 1e6:.2f} Mpps during the applies, "
      f"{rate_after / 1e6:.2f} Mpps in the second after)")
print(f"  forwarded {fwd}, dropped {dropped}, rx - forwarded - dropped = {rx - fwd - dropped} "
      f"(counter read skew), tx B {txb}")
print("  " + ", ".join(f"{k} {v}" for k, v in lost.items()) if lost else "  no drop reason moved")
print(f"  lost packets: {total_lost} (target 0: {'PASS' if total_lost == 0 else 'FAIL'}); "
      f"versions +1 per apply: {'yes' if mono else 'NO'}; all workers on generation "
      f"{st.get('generation')}: {'yes' if workers_ok else 'NO'}")
json.dump({"summary": summary, "lost": lost, "total_lost": total_lost, "rx": rx, "secs": secs,
           "mpps_during": rx / secs / 1e6, "mpps_after": rate_after / 1e6,
           "loss_wall_s": (tl1 - tl0) / 1e9, "phases": phases, "markdown": md},
          open(f"{out}/summary.json", "w"), indent=1)
open(f"{out}/table.md", "w").write("\n".join(md) + "\n")
sys.exit(0 if total_lost == 0 and mono and workers_ok else 1)
EOF
