#!/usr/bin/env bash
# --- dpi --- YARA rule edits against a running appliance (issue 3): `dpuctl dpi add`
# (AddYaraRule: one rule appended to a rule set) against its peer, `dpuctl config apply` of the
# whole document carrying the same kind of change (one more rule in the same rule set), in the
# same run, interleaved (add, apply, add, apply ...). Both validate the whole document with
# libyara, translate it and compile a new Hyperscan database (there is no incremental Hyperscan
# compile), persist and publish; the add also checks the new text with libyara on its own
# first. Reported: medians of the server phases (ApplyConfigResponse) and of the dpuctl wall
# time, and the ratio add / apply. Rules loaded: RULES (default Yara-Rules crypto, 1 file).
#
# Set-up as bench/apply_bench.sh: lcores 0,1, EAL --no-huge, net_pcap0 (gen_traffic.py, 1024
# flows, infinite_rx) -> net_null0, a private state dir in OUTDIR.
#
# usage: bench/dpi_apply_bench.sh [-o OUTDIR] [-n N] [--rules FILE_OR_DIR] [--appliance BIN]
#                                 [--dpuctl BIN]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
source "$HERE/eal_dirs.sh"
PY=/usr/bin/python3
OUTDIR=""
N=10
RULES="$ROOT/../shared/data/yara/Yara-Rules+rules/crypto/crypto_signatures.yar"
APP="$ROOT/build/control/dpu-appliance"
CTL="$ROOT/build/control/dpuctl"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o) OUTDIR="$2"; shift 2 ;;
    -n) N="$2"; shift 2 ;;
    --rules) RULES="$2"; shift 2 ;;
    --appliance) APP="$2"; shift 2 ;;
    --dpuctl) CTL="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "dpi_apply_bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
die() { echo "dpi_apply_bench: $*" >&2; exit 1; }
[[ -x "$APP" && -x "$CTL" ]] || die "build first (need $APP and $CTL)"
[[ -e "$RULES" ]] || die "no rules at $RULES"
[[ -n "$OUTDIR" ]] || OUTDIR="$(mktemp -d /tmp/dpi_apply_bench.XXXXXX)"
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
cp "$APP" "$OUTDIR/dpu-appliance"; cp "$CTL" "$OUTDIR/dpuctl"
APP="$OUTDIR/dpu-appliance"; CTL="$OUTDIR/dpuctl"
STATE="$OUTDIR/state"; rm -rf "$STATE"; mkdir -m 700 "$STATE"
PCAP="$OUTDIR/traffic.pcap"
"$PY" "$HERE/gen_traffic.py" -o "$PCAP" --flows 1024 >"$OUTDIR/gen.txt"
RULES="$(cd "$(dirname "$RULES")" && pwd)/$(basename "$RULES")"
printf '{"dpi": {"rule_files": ["%s"], "rule_sets": [{"name": "bench", "text": "rule seed { strings: $a = \\"SEED-0\\" condition: $a }\\n"}]}}\n' \
  "$RULES" >"$OUTDIR/config.json"

APP_LOG="$OUTDIR/appliance.err"
eal_dirs_track "dpiab_$$"
"$APP" run --state-dir "$STATE" --config "$OUTDIR/config.json" -- \
  -l 0,1 --no-huge --no-pci --no-shconf --file-prefix="dpiab_$$" -m 1024 --log-level=lib.eal:error \
  --vdev "net_pcap0,rx_pcap=$PCAP,infinite_rx=1" --vdev net_null0,no-rx=1 >"$OUTDIR/appliance.out" 2>"$APP_LOG" &
APP_PID=$!
trap 'kill -TERM $APP_PID 2>/dev/null; wait $APP_PID 2>/dev/null || true; eal_dirs_cleanup' EXIT
for ((i = 0; i < 1200; i++)); do
  grep -q "forwarding between" "$APP_LOG" 2>/dev/null && break
  kill -0 "$APP_PID" 2>/dev/null || die "dpu-appliance exited, see $APP_LOG"
  sleep 0.1
done
ADDR=$(sed -n 's/^dpu-appliance: API listening on \([^ ]*\) .*/\1/p' "$APP_LOG" | head -1)
[[ -n "$ADDR" ]] || die "appliance did not start, see $APP_LOG"
ctl() { "$CTL" --server "$ADDR" "$@"; }
RES="$OUTDIR/edits.tsv"; : >"$RES"
timed() {  # $1 kind, $2 index, command...
  local kind=$1 i=$2 t0 t1 out
  shift 2
  t0=$(date +%s%N)
  out=$("$@" 2>"$OUTDIR/err.txt") || die "$kind #$i failed: $(cat "$OUTDIR/err.txt")"
  t1=$(date +%s%N)
  printf '%s\t%s\t%s\t%s\n' "$kind" "$i" "$(( (t1 - t0) / 1000 ))" "$(echo "$out" | tr -d '\n')" >>"$RES"
}
echo "dpi_apply_bench: rules $RULES, $N edits each, load $(cut -d' ' -f1-3 /proc/loadavg), logs in $OUTDIR"
for ((i = 1; i <= N; i++)); do
  printf 'rule add_%d { strings: $a = "ADD-MARKER-%d" condition: $a }\n' "$i" "$i" >"$OUTDIR/add.yar"
  timed add "$i" ctl --json dpi add "$OUTDIR/add.yar" --set bench --force
  ctl config get >"$OUTDIR/doc.json"
  "$PY" - "$OUTDIR/doc.json" "$i" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
s = [x for x in d["dpi"]["rule_sets"] if x["name"] == "bench"][0]
s["text"] += 'rule apply_%s { strings: $a = "APPLY-MARKER-%s" condition: $a }\n' % (sys.argv[2], sys.argv[2])
d.pop("version", None)
json.dump(d, open(sys.argv[1], "w"))
PYEOF
  timed apply "$i" ctl --json config apply "$OUTDIR/doc.json" --force
done
"$PY" - "$RES" <<'PYEOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kind, i, wall_us, js = line.rstrip("\n").split("\t", 3)
    r = json.loads(js)
    ph = [float(r.get(k, 0)) for k in ("validate_ms", "compile_ms", "prepare_ms", "persist_ms", "publish_ms")]
    rows.setdefault(kind, []).append(ph + [sum(ph), int(wall_us) / 1000])
cols = ["validate", "compile", "prepare", "persist", "publish", "server", "dpuctl"]
med = {k: [statistics.median(c) for c in zip(*v)] for k, v in rows.items()}
print("| edit | n | " + " | ".join(c + " ms" for c in cols) + " |")
print("|---|---:|" + "---:|" * len(cols))
for k in ("add", "apply"):
    print("| %s | %d | " % ("dpi add (AddYaraRule)" if k == "add" else "config apply (whole document)", len(rows[k]))
          + " | ".join("%.1f" % x for x in med[k]) + " |")
print("ratio add / apply (medians): server %.2f, dpuctl %.2f" % (med["add"][5] / med["apply"][5], med["add"][6] / med["apply"][6]))
PYEOF
