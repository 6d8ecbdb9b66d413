#!/usr/bin/env bash
# End-to-end DPI cost: the appliance with ~1k YARA rules loaded (the accepted rules of
# Yara-Rules malware + crypto, webshells, antidebug_antivm, cve_rules, exploit_kits, maldocs,
# packers, email, capabilities, mobile_malware: the rule files libyara accepts) against the
# no-rule pipeline, same IMIX traffic, same core, runs interleaved, through
# bench/fw_e2e_bench.sh -c CONFIG (which runs bench/fwd_bench.sh --only appliance).
#
# Traffic: bench/dpi_traffic.py: complete bidirectional TCP sessions (handshake, 18 data
# segments of 6 / 512 / 1460 B payload in both directions, FIN both ways), IMIX 7:4:1 of
# 64/570/1518 B frames, SESSIONS sessions with CONCURRENT open at a time; the pcap is
# replayed in a loop (each replay of a session is a new connection: the closed flow is
# reused by the SYN, so the DPI streams start again and every payload byte is scanned).
#
# Before the timed runs, one `dpu-appliance replay` of the pcap with the DPI config compiles
# the rules into the Hyperscan cache (dpi.cache_dir; the timed runs load it) and prints the
# replay summary's DPI line (bytes scanned, alerts) as a check that the traffic is inspected.
#
# usage: bench/dpi_e2e_bench.sh [-m auto|compressed|full] [-s SESSIONS] [-C CONCURRENT]
#                               [-r REPS] [-d DURATION] [-w WARMUP] [-o OUTDIR] [-R]
#                               [fwd_bench.sh options, e.g. --min-cpu 0 on a busy machine]
# -R: the replay only (no timed runs): the sizing check of docs/dpi.md (every direction of
# the mix inspected: dpi no_stream 0, tcp_stream no_window / overlap_unverified /
# fail_closed 0) and the worker cycles per packet by bucket (stream = normalization).
# Besides fw_e2e_bench.sh's Mpps medians and ratio it prints each run's Mpps divided by the
# share of a CPU its worker thread got (fwd_bench's worker-cpu column): packets per second of
# worker CPU time, the comparable figure when other work shares the cores.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY=/usr/bin/python3
MODE=auto SESSIONS=2000 CONCURRENT=256 REPS=3 DURATION=5 WARMUP=3 OUTDIR="" REPLAY_ONLY=""
EXTRA=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -m) MODE=$2; shift 2 ;;
    -s) SESSIONS=$2; shift 2 ;;
    -C) CONCURRENT=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    -d) DURATION=$2; shift 2 ;;
    -w) WARMUP=$2; shift 2 ;;
    -o) OUTDIR=$2; shift 2 ;;
    -R) REPLAY_ONLY=1; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) EXTRA+=("$1"); shift ;;
  esac
done
case $MODE in
  auto) MODE_JSON="" ;;
  compressed) MODE_JSON=', "stream_mode": "STREAM_COMPRESSED"' ;;
  full) MODE_JSON=', "stream_mode": "STREAM_FULL"' ;;
  *) echo "dpi_e2e_bench: -m auto|compressed|full" >&2; exit 2 ;;
esac
APP=${APP:-$ROOT/build/control/dpu-appliance}
COV=${COV:-$ROOT/build/rules/dpi-coverage}
YARA=${YARA:-$ROOT/../shared/data/yara/Yara-Rules+rules}
OUTDIR=${OUTDIR:-$(mktemp -d /tmp/dpi_e2e.XXXXXX)}
mkdir -p "$OUTDIR/hscache"

PCAP=$OUTDIR/imix_sessions.pcap
(cd "$HERE" && "$PY" dpi_traffic.py -o "$PCAP" --sessions "$SESSIONS" --concurrent "$CONCURRENT")

# Rule files: every .yar of the chosen directories that libyara accepts.
dirs=()
for d in malware crypto webshells antidebug_antivm cve_rules exploit_kits maldocs packers email \
         capabilities mobile_malware; do
  [[ -d $YARA/$d ]] && dirs+=("$YARA/$d")
done
[[ ${#dirs[@]} -gt 0 ]] || { echo "dpi_e2e_bench: no rule directories under $YARA" >&2; exit 1; }
"$COV" "${dirs[@]}" >"$OUTDIR/coverage.txt" 2>&1 || true
rejected=$(sed -n 's/^  rejected file \([^:]*\):.*/\1/p' "$OUTDIR/coverage.txt" | sort -u)
files=()
while IFS= read -r f; do
  grep -qxF "$f" <<<"$rejected" || files+=("$f")
done < <(find "${dirs[@]}" -maxdepth 1 -type f \( -name '*.yar' -o -name '*.yara' \) | sort)
CFG=$OUTDIR/dpi_${MODE}.json
{
  printf '{"dpi": {"cache_dir": "%s"%s, "rule_files": [' "$OUTDIR/hscache" "$MODE_JSON"
  sep=""
  for f in "${files[@]}"; do printf '%s"%s"' "$sep" "$f"; sep=", "; done
  printf ']}}\n'
} >"$CFG"
echo "dpi_e2e_bench: ${#files[@]} rule files ($(grep -c '^  rejected file' "$OUTDIR/coverage.txt" || true) rejected by libyara), stream mode $MODE, config $CFG"

# Compile once into the cache; check the DPI path sees the traffic.
start=$(date +%s)
"$APP" replay --config "$CFG" --in "$PCAP" --summary-json "$OUTDIR/replay_summary.json" --quiet \
  >"$OUTDIR/replay.log" 2>&1 || { echo "dpi_e2e_bench: replay failed, see $OUTDIR/replay.log" >&2; exit 1; }
echo "dpi_e2e_bench: replay of the pcap (compile into the cache included): $(($(date +%s) - start)) s"
"$PY" - "$OUTDIR/replay_summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
def find(o, k):
    if isinstance(o, dict):
        if k in o: return o[k]
        for v in o.values():
            r = find(v, k)
            if r is not None: return r
    return None
print("replay summary dpi:", json.dumps(find(s, "dpi")))
print("replay summary tcp_stream:", json.dumps(find(s, "tcp_stream")))
EOF
if [[ -n $REPLAY_ONLY ]]; then
  # The text summary of the same replay: counters and worker cycles per packet by bucket.
  "$APP" replay --config "$CFG" --in "$PCAP" >"$OUTDIR/replay_summary.txt" 2>&1
  sed -n '/^worker cycles/,/^$/p' "$OUTDIR/replay_summary.txt"
  exit 0
fi

"$HERE/fw_e2e_bench.sh" -c "$CFG" -f 1000 -r "$REPS" -d "$DURATION" -w "$WARMUP" \
  -o "$OUTDIR/e2e" -p "$PCAP" "${EXTRA[@]}"
"$PY" - "$OUTDIR/e2e" "$REPS" <<'EOF'
import re, statistics, sys
d, reps = sys.argv[1], int(sys.argv[2])
per = {}
for what in ("none", "rules"):
    xs = []
    for r in range(1, reps + 1):
        for line in open(f"{d}/{what}_{r}.log"):
            m = re.match(r"\s*\d+\s+appliance\s+([\d.]+)\s+([\d.]+)%", line)
            if m and "discarded" not in line:
                xs.append(float(m.group(1)) / (float(m.group(2)) / 100))
    per[what] = xs
    print(f"{what}: Mpps per worker CPU-second: " + " ".join(f"{x:.3f}" for x in xs) +
          (f"  median {statistics.median(xs):.3f}" if xs else ""))
if per["none"] and per["rules"]:
    print(f"ratio rules / none per worker CPU-second: "
          f"{statistics.median(per['rules']) / statistics.median(per['none']):.3f}")
EOF
