#!/usr/bin/env bash
# --- dpi --- YARA rule edits against a running appliance (issues 3 and 31): one rule added
# (`dpuctl dpi add`: AddYaraRule), changed (`dpuctl config apply` of the committed document
# with that rule's string changed) and removed (`dpuctl dpi remove`), on a rule set of RULES
# plus a small rule set `bench`, in two configurations run one after the other on the same
# traffic, rules and edits:
#   sharded      the default: incremental compiles (docs/dpi.md "Shards and incremental
#                compiles"): the changed source's patterns in a delta database, the changed
#                shard merged in the background and republished;
#   single-db    the peer: dpi.shards 1 + dpi.full_recompile: every edit compiles the whole
#                Hyperscan database before the apply returns (what every edit cost before).
# Each edit waits for the previous one's background merge. Reported per configuration and
# edit kind: medians of the server phases (ApplyConfigResponse), the dpuctl wall time, the
# background merge (edit answered -> "background merge done" in the log; 0 when the edit queued
# none: ApplyConfigResponse.dpi_compile.merges_pending), the appliance's
# RSS before the edits and its peak (VmHWM, reset through /proc/PID/clear_refs) over the
# edits and merges; and the ratios single-db / sharded.
# RULES: a .yar file, or a directory whose .yar files libyara accepts (build/rules/dpi-coverage
# decides; default: Yara-Rules malware, ~180 files, ~1,200 rules).
#
# Set-up as bench/apply_bench.sh: lcores 0,1, EAL --no-huge, net_pcap0 (gen_traffic.py, 1024
# flows, infinite_rx) -> net_null0, a private state dir per configuration in OUTDIR.
#
# usage: bench/dpi_apply_bench.sh [-o OUTDIR] [-n N] [--rules FILE_OR_DIR] [--appliance BIN]
#                                 [--dpuctl BIN] [--configs "sharded single-db"] [--shards K]
# (--shards: dpi.shards of the sharded configuration; default the product's)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
source "$HERE/eal_dirs.sh"
PY=/usr/bin/python3
OUTDIR=""
N=10
RULES="$ROOT/../shared/data/yara/Yara-Rules+rules/malware"
APP="$ROOT/build/control/dpu-appliance"
CTL="$ROOT/build/control/dpuctl"
COV="$ROOT/build/rules/dpi-coverage"
CONFIGS="sharded single-db"
SHARDS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o) OUTDIR="$2"; shift 2 ;;
    -n) N="$2"; shift 2 ;;
    --rules) RULES="$2"; shift 2 ;;
    --appliance) APP="$2"; shift 2 ;;
    --dpuctl) CTL="$2"; shift 2 ;;
    --configs) CONFIGS="$2"; shift 2 ;;
    --shards) SHARDS="$2"; shift 2 ;;
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
PCAP="$OUTDIR/traffic.pcap"
"$PY" "$HERE/gen_traffic.py" -o "$PCAP" --flows 1024 >"$OUTDIR/gen.txt"
files=()
if [[ -d "$RULES" ]]; then
  [[ -x "$COV" ]] || die "build first (need $COV to pick the files libyara accepts)"
  "$COV" "$RULES" >"$OUTDIR/coverage.txt" 2>&1 || true
  rejected=$(sed -n 's/^  rejected file \([^:]*\):.*/\1/p' "$OUTDIR/coverage.txt" | sort -u)
  while IFS= read -r f; do
    grep -qxF "$f" <<<"$rejected" || files+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
  done < <(find "$RULES" -maxdepth 1 -type f \( -name '*.yar' -o -name '*.yara' \) | sort)
else
  files=("$(cd "$(dirname "$RULES")" && pwd)/$(basename "$RULES")")
fi
[[ ${#files[@]} -gt 0 ]] || die "no rule file libyara accepts under $RULES"
RES="$OUTDIR/edits.tsv"; : >"$RES"
echo "dpi_apply_bench: ${#files[@]} rule files from $RULES, $N edits of each kind per configuration, load $(cut -d' ' -f1-3 /proc/loadavg), logs in $OUTDIR"

APP_PID=""
trap '[[ -n $APP_PID ]] && { kill -TERM $APP_PID 2>/dev/null; wait $APP_PID 2>/dev/null || true; }; eal_dirs_cleanup' EXIT
rss_kb() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status"; }

for CFGNAME in $CONFIGS; do
  case "$CFGNAME" in
    sharded) EXTRA=${SHARDS:+"\"shards\": $SHARDS, "} ;;
    single-db) EXTRA='"shards": 1, "full_recompile": true, ' ;;
    *) die "unknown configuration $CFGNAME (sharded, single-db)" ;;
  esac
  D="$OUTDIR/$CFGNAME"; mkdir -p "$D"
  STATE="$D/state"; rm -rf "$STATE"; mkdir -m 700 "$STATE"
  {
    printf '{"dpi": {%s"rule_files": [' "$EXTRA"
    sep=""
    for f in "${files[@]}"; do printf '%s"%s"' "$sep" "$f"; sep=", "; done
    printf '], "rule_sets": [{"name": "bench", "text": "rule seed { strings: $a = \\"SEED-0\\" condition: $a }\\n"}]}}\n'
  } >"$D/config.json"
  APP_LOG="$D/appliance.err"
  eal_dirs_track "dpiab_$$_$CFGNAME"
  start=$(date +%s%N)
  "$APP" run --state-dir "$STATE" --config "$D/config.json" -- \
    -l 0,1 --no-huge --no-pci --no-shconf --file-prefix="dpiab_$$_$CFGNAME" -m 1024 --log-level=lib.eal:error \
    --vdev "net_pcap0,rx_pcap=$PCAP,infinite_rx=1" --vdev net_null0,no-rx=1 >"$D/appliance.out" 2>"$APP_LOG" &
  APP_PID=$!
  for ((i = 0; i < 3000; i++)); do
    grep -q "forwarding between" "$APP_LOG" 2>/dev/null && break
    kill -0 "$APP_PID" 2>/dev/null || die "dpu-appliance exited, see $APP_LOG"
    sleep 0.1
  done
  ready_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  ADDR=$(sed -n 's/^dpu-appliance: API listening on \([^ ]*\) .*/\1/p' "$APP_LOG" | head -1)
  [[ -n "$ADDR" ]] || die "appliance did not start, see $APP_LOG"
  ctl() { "$CTL" --server "$ADDR" --timeout 0 "$@"; }  # a whole recompile may take minutes
  merges() { grep -c "background merge done" "$APP_LOG" 2>/dev/null || true; }
  wait_merge() {  # $1 merges seen before the edit, $2 the response; ms waited after the edit (0: none queued)
    local before=$1 t0 i
    t0=$(date +%s%N)
    grep -q '"merges_pending": *[1-9]' <<<"$2" || { echo 0; return; }
    for ((i = 0; i < 1200; i++)); do
      [[ $(merges) -gt $before ]] && { echo $(( ($(date +%s%N) - t0) / 1000000 )); return; }
      sleep 0.05
    done
    echo -1
  }
  timed() {  # $1 kind, $2 index, command...
    local kind=$1 i=$2 t0 t1 out m0 wm
    shift 2
    m0=$(merges)
    t0=$(date +%s%N)
    out=$("$@" 2>"$D/err.txt") || die "$CFGNAME $kind #$i failed: $(cat "$D/err.txt")"
    t1=$(date +%s%N)
    wm=$(wait_merge "$m0" "$out")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$CFGNAME" "$kind" "$i" "$(( (t1 - t0) / 1000 ))" "$wm" "$(echo "$out" | tr -d '\n')" >>"$RES"
  }
  sleep 2  # traffic flowing, first merges (none after a cold start) settled
  steady=$(rss_kb "$APP_PID" VmRSS)
  echo 5 >"/proc/$APP_PID/clear_refs" 2>/dev/null || true
  for ((i = 1; i <= N; i++)); do
    printf 'rule add_%d { strings: $a = "ADD-MARKER-%d" condition: $a }\n' "$i" "$i" >"$D/add.yar"
    timed add "$i" ctl --json dpi add "$D/add.yar" --set bench --force
    ctl config get >"$D/doc.json"
    "$PY" - "$D/doc.json" "$i" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
s = [x for x in d["dpi"]["rule_sets"] if x["name"] == "bench"][0]
s["text"] = s["text"].replace('"ADD-MARKER-%s"' % sys.argv[2], '"CHANGED-MARKER-%s"' % sys.argv[2])
d.pop("version", None)
json.dump(d, open(sys.argv[1], "w"))
PYEOF
    timed change "$i" ctl --json config apply "$D/doc.json" --force
    timed remove "$i" ctl --json dpi remove "bench:add_$i" --force
  done
  peak=$(rss_kb "$APP_PID" VmHWM)
  printf 'mem\t%s\t%s\t%s\t%s\n' "$CFGNAME" "$steady" "$peak" "$ready_ms" >>"$RES"
  kill -TERM "$APP_PID"; wait "$APP_PID" 2>/dev/null || true; APP_PID=""
done

"$PY" - "$RES" <<'PYEOF'
import json, statistics, sys
rows, mem = {}, {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if f[0] == "mem":
        mem[f[1]] = (int(f[2]), int(f[3]), int(f[4]))
        continue
    cfg, kind, i, wall_us, merge_ms, js = f
    r = json.loads(js)
    ph = [float(r.get(k, 0)) for k in ("validate_ms", "compile_ms", "prepare_ms", "persist_ms", "publish_ms")]
    dc = r.get("dpi_compile", {})
    rows.setdefault((cfg, kind), []).append(ph + [sum(ph), int(wall_us) / 1000, float(merge_ms),
                                              float(dc.get("patterns_compiled", 0)), float(dc.get("sources_translated", 0))])
cols = ["validate", "compile", "prepare", "persist", "publish", "server", "dpuctl", "merge"]
print("| config | edit | n | " + " | ".join(c + " ms" for c in cols) + " | patterns compiled | sources translated |")
print("|---|---|---:|" + "---:|" * (len(cols) + 2))
med = {}
for (cfg, kind), v in rows.items():
    med[(cfg, kind)] = [statistics.median(c) for c in zip(*v)]
    m = med[(cfg, kind)]
    print("| %s | %s | %d | " % (cfg, kind, len(v)) + " | ".join("%.1f" % x for x in m[:len(cols)])
          + " | %d | %d |" % (m[len(cols)], m[len(cols) + 1]))
for cfg, (steady, peak, ready) in mem.items():
    print("%s: RSS before the edits %.1f MiB, peak over edits and merges %.1f MiB (%.2fx); started and forwarding %.1f s after launch"
          % (cfg, steady / 1024, peak / 1024, peak / max(steady, 1), ready / 1000))
for kind in ("add", "change", "remove"):
    a, b = med.get(("sharded", kind)), med.get(("single-db", kind))
    if a and b:
        print("%s: server ms single-db / sharded %.1f (%.1f vs %.1f ms)" % (kind, b[5] / max(a[5], 0.01), b[5], a[5]))
PYEOF
