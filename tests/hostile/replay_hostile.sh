#!/usr/bin/env bash
# Hostile pcaps: replays real captures (../shared/data/pcap) through a sanitizer build of
# dpu-appliance with two configs: strict.json (every policy DROP, smallest tables, shortest
# timeouts) and forward.json (every policy FORWARD, small tables). Fails on any crash,
# sanitizer report (ASan/LSan/UBSan, halt_on_error), hang (HOSTILE_TIMEOUT s per replay,
# default 300), or a clean error on a capture that should replay: every Ethernet capture must
# replay with exit 0; a capture of lists/malformed_or_unreadable.txt may instead be refused
# with a one-line error (exit 1), never crash.
#
#   tests/hostile/replay_hostile.sh --ci  BINARY   the CI subset (ctest hostile_pcaps)
#   tests/hostile/replay_hostile.sh --all BINARY   every Ethernet capture (scripts/fuzz --hostile-all)
#
# The CI subset (deterministic): every Ethernet capture of at most HOSTILE_MAX_BYTES (default
# 300) bytes (mostly tcpdump's crafted one- and two-packet cases), every Ethernet capture in
# the feature lists HOSTILE_LISTS (default: ipv4_fragments ipv6_fragments vlan qinq, whatever
# their size: the fragment tracker and the VLAN paths), and every capture in
# lists/malformed_or_unreadable.txt. INDEX.tsv (column "encapsulation" == ether) says which
# captures are Ethernet; the replay refuses the others.
#
# Each process pays for a DPDK EAL start (~0.3 s; EAL starts once per process), so Ethernet
# captures run two per process: one on side A (--in), the next on side B (--in-b), merged by
# timestamp (which also feeds the appliance timestamps from unrelated captures). A pair that
# fails is replayed again one capture at a time to name the culprit. HOSTILE_PAIR=0 replays
# every capture alone. HOSTILE_JOBS (default 2) processes run at a time.
#
# known_failures.tsv lists captures that fail for a known, reported reason (capture, reason):
# they run alone (HOSTILE_XFAIL_TIMEOUT, default 20 s, for hangs) and must still fail; one
# that passes fails the test until its line is removed.
# Without ../shared/data (or $DPU_SHARED_DATA) it prints "SKIPPED: ..." and exits 77.
set -euo pipefail

# replay BINARY CONFIG LIMIT PCAP_A [PCAP_B]: sets verdict (ok / refused / FAIL) and why.
replay() {
  local bin=$1 cfg=$2 limit=$3 a=$4 b=${5:-}
  local work rc=0
  work=$(mktemp -d "${TMPDIR:-/tmp}/hostile.XXXXXX")
  local args=(--in "$a")
  # dpu-appliance takes vdev arguments: no ',' in a path.
  if [[ $a == *,* ]]; then ln -s "$a" "$work/in_a.pcap"; args=(--in "$work/in_a.pcap"); fi
  if [[ -n $b ]]; then
    if [[ $b == *,* ]]; then ln -s "$b" "$work/in_b.pcap"; b=$work/in_b.pcap; fi
    args+=(--in-b "$b")
  fi
  echo x >>"$res/replays"
  # exitcode=86: a sanitizer exit cannot pass for the replay's own "exit 1" error.
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:exitcode=86 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=86 \
    timeout -k 10 "$limit" "$bin" replay --config "$cfg" "${args[@]}" \
      --out "$work/out_b.pcap" --out-a "$work/out_a.pcap" --verdicts "$work/verdicts.jsonl" \
      --events "$work/events.jsonl" --summary-json "$work/summary.json" --quiet \
      >"$work/stdout" 2>"$work/stderr" || rc=$?
  verdict=ok
  why=""
  if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|UndefinedBehaviorSanitizer|SUMMARY: (Address|Leak|Undefined)' "$work/stderr"; then
    verdict=FAIL why="sanitizer report"
  elif ((rc == 124 || rc == 137)); then
    verdict=FAIL why="hung (killed after $limit s)"
  elif ((rc > 1)); then
    verdict=FAIL why="crashed (exit $rc)"
  elif ((rc == 1)); then
    verdict=refused why=$(head -c 300 "$work/stderr" | tr '\n\t' '  ')
  elif [[ ! -s $work/summary.json ]]; then
    verdict=FAIL why="exit 0 without a summary"
  else
    # One verdict line per packet read (replay checks it too; this guards the outputs).
    local rx_a rx_b lines
    rx_a=$(sed -n 's/.*"A":{"rx_packets":\([0-9]*\).*/\1/p' "$work/summary.json")
    rx_b=$(sed -n 's/.*"B":{"rx_packets":\([0-9]*\).*/\1/p' "$work/summary.json")
    lines=$(wc -l <"$work/verdicts.jsonl")
    if [[ -z $rx_a || -z $rx_b || $((rx_a + rx_b)) != "$lines" ]]; then
      verdict=FAIL why="${rx_a:-?}+${rx_b:-?} packets read but $lines verdict lines"
    fi
  fi
  if [[ $verdict == FAIL ]]; then
    {
      echo "==== FAIL [$(basename "$cfg" .json)] $a${b:+ (side B: $b)}: $why"
      tail -n 40 "$work/stderr"
    } >"$work/failure"
  fi
  failure_log=$work/failure
  cleanup_dirs+=("$work")
}

# record VERDICT CONFIG CAPTURES WHY [FAILURE_FILE]
record() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$(basename "$2" .json)" "$3" "$4" >>"$res/results.tsv"
  if [[ $1 == FAIL && -n ${5:-} && -f ${5:-} ]]; then cat "$5" >>"$res/failures.log"; fi
}

if [[ ${1:-} == --job ]]; then
  # Worker: --job ID BINARY CONFIG PCAP_A PCAP_B|- MALFORMED(0/1) KNOWN(0/1). Appends to the
  # files of $HOSTILE_RESULT_DIR (short lines, O_APPEND: no interleaving between workers).
  id=$2 bin=$3 cfg=$4 a=$5 b=$6 malformed=$7 known=$8 res=$HOSTILE_RESULT_DIR
  cleanup_dirs=()
  trap 'rm -rf "${cleanup_dirs[@]}"' EXIT
  limit=${HOSTILE_TIMEOUT:-300}
  ((known == 0)) || limit=${HOSTILE_XFAIL_TIMEOUT:-20}
  if [[ $b == - ]]; then
    replay "$bin" "$cfg" "$limit" "$a"
    if [[ $verdict == refused && $malformed == 0 ]]; then
      verdict=FAIL why="refused an Ethernet capture: $why"
      echo "==== FAIL [$(basename "$cfg" .json)] $a: $why" >"$failure_log"
    fi
    if ((known)); then
      case $verdict in
        FAIL) verdict=xfail ;;
        ok) verdict=FAIL why="XPASS: passes now: remove it from tests/hostile/known_failures.tsv"
            echo "==== $a: $why" >"$failure_log" ;;
      esac
    fi
    record "$verdict" "$cfg" "$a" "$why" "$failure_log"
  else
    replay "$bin" "$cfg" "$limit" "$a" "$b"
    if [[ $verdict == ok ]]; then
      record ok "$cfg" "$a + $b" ""
    else
      pair_why=$why pair_log=$failure_log
      # Name the culprit: each capture alone.
      alone_failed=0
      for p in "$a" "$b"; do
        replay "$bin" "$cfg" "$limit" "$p"
        [[ $verdict == refused ]] && { verdict=FAIL why="refused an Ethernet capture: $why"; }
        [[ $verdict == FAIL ]] && alone_failed=1
        record "$verdict" "$cfg" "$p" "$why" "$failure_log"
      done
      if ((alone_failed == 0)); then
        record FAIL "$cfg" "$a + $b" "fails only as a pair (A on side A, B on side B): $pair_why" "$pair_log"
      fi
    fi
  fi
  echo "$id" >>"$res/done"
  exit 0
fi

usage() { echo "usage: $0 --ci|--all BINARY" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
mode=$1 bin=$2
[[ $mode == --ci || $mode == --all ]] || usage
[[ -x $bin ]] || { echo "binary '$bin' not found or not executable" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
data=${DPU_SHARED_DATA:-$repo/../shared/data}
pcaps=$(cd "$data" 2>/dev/null && pwd)/pcap || true
if [[ ! -f $pcaps/INDEX.tsv ]]; then
  echo "SKIPPED: $data/pcap/INDEX.tsv not found: the shared capture set (../shared/data, or" \
       "\$DPU_SHARED_DATA) is not on this machine"
  exit 77
fi
max_bytes=${HOSTILE_MAX_BYTES:-300}
lists=${HOSTILE_LISTS-ipv4_fragments ipv6_fragments vlan qinq}
jobs=${HOSTILE_JOBS:-2}

res=$(mktemp -d "${TMPDIR:-/tmp}/hostile-run.XXXXXX")
trap 'rm -rf "$res"' EXIT
cut -f1 "$pcaps/lists/malformed_or_unreadable.txt" 2>/dev/null | sed '/^$/d' | sort -u >"$res/malformed"
{ grep -v '^#' "$here/known_failures.tsv" || true; } | cut -f1 | sed '/^$/d' | sort -u >"$res/known"
: >"$res/features"
if [[ $mode == --ci ]]; then
  for l in $lists; do
    [[ -f $pcaps/lists/$l.txt ]] || { echo "FAIL: no list $pcaps/lists/$l.txt"; exit 1; }
    cut -f1 "$pcaps/lists/$l.txt" >>"$res/features"
  done
fi
# INDEX.tsv columns: 2 file, 5 size, 8 encapsulation.
awk -F'\t' -v all="$([[ $mode == --all ]] && echo 1 || echo 0)" -v max="$max_bytes" \
    'FILENAME == ARGV[1] { feature[$1] = 1; next }
     FNR > 1 && $8 == "ether" && (all == 1 || $5 <= max || ($2 in feature)) { print $2 }' \
    "$res/features" "$pcaps/INDEX.tsv" | sort -u >"$res/ether"
total_ether=$(awk -F'\t' 'NR > 1 && $8 == "ether"' "$pcaps/INDEX.tsv" | wc -l)
sort -u "$res/ether" "$res/malformed" >"$res/selected"
n=$(wc -l <"$res/selected")
while IFS= read -r rel; do
  [[ -f $pcaps/$rel ]] || { echo "FAIL: selected capture $pcaps/$rel is missing"; exit 1; }
done <"$res/selected"

# Jobs: malformed-listed and known-failing captures alone, the others in pairs.
solo=() paired=()
while IFS= read -r rel; do
  if grep -qxF "$rel" "$res/malformed" || grep -qxF "$rel" "$res/known" ||
     [[ ${HOSTILE_PAIR:-1} == 0 ]]; then
    solo+=("$rel")
  else
    paired+=("$rel")
  fi
done <"$res/selected"
njobs=0
: >"$res/jobs"
add_job() {  # add_job A B|- MALFORMED KNOWN
  for cfg in "$here/strict.json" "$here/forward.json"; do
    njobs=$((njobs + 1))
    printf '%s\0' "$njobs" "$bin" "$cfg" "$1" "$2" "$3" "$4" >>"$res/jobs"
  done
}
for rel in "${solo[@]}"; do
  m=0 k=0
  grep -qxF "$rel" "$res/malformed" && m=1
  grep -qxF "$rel" "$res/known" && k=1
  add_job "$pcaps/$rel" - "$m" "$k"
done
for ((i = 0; i < ${#paired[@]}; i += 2)); do
  if ((i + 1 < ${#paired[@]})); then
    add_job "$pcaps/${paired[i]}" "$pcaps/${paired[i + 1]}" 0 0
  else
    add_job "$pcaps/${paired[i]}" - 0 0
  fi
done

if [[ $mode == --all ]]; then
  what="all $total_ether Ethernet ones"
else
  what="$(wc -l <"$res/ether") of $total_ether Ethernet ones: size <= $max_bytes B or listed in"
  what+=" ${lists:-no list}"
fi
echo "hostile: $n captures ($what; plus the $(wc -l <"$res/malformed") listed as" \
  "malformed/unreadable), 2 configs: $njobs jobs (${#paired[@]} captures two per process)," \
  "$jobs at a time"
t0=$SECONDS
: >"$res/results.tsv"
: >"$res/done"
: >"$res/replays"
HOSTILE_RESULT_DIR=$res xargs -0 -n 7 -P "$jobs" "$0" --job <"$res/jobs" || true

done_jobs=$(sort -u "$res/done" | wc -l)
replays=$(wc -l <"$res/replays")
count() { grep -c "^$1"$'\t' "$res/results.tsv" || true; }
fails=$(count FAIL)
xfails=$(count xfail)
echo "hostile: $done_jobs of $njobs jobs, $replays replays in $((SECONDS - t0)) s: $(count ok) ok," \
     "$(count refused) refused cleanly (malformed/unreadable captures), $xfails known failures," \
     "$fails failed"
grep $'^refused\t' "$res/results.tsv" | cut -f4 | sort -u | sed 's/^/  refused: /' | head -40 || true
if ((xfails)); then
  while IFS=$'\t' read -r rel why; do
    [[ -z $rel || $rel == \#* ]] && continue
    if grep $'^xfail\t' "$res/results.tsv" | cut -f3 | grep -qxF "$pcaps/$rel"; then
      echo "  KNOWN FAILURE (still failing, not fixed yet): $rel: $why"
    fi
  done <"$here/known_failures.tsv"
fi
if ((fails || done_jobs != njobs)); then
  ((done_jobs == njobs)) || echo "FAIL: only $done_jobs of $njobs jobs reported"
  [[ -f $res/failures.log ]] && cat "$res/failures.log"
  exit 1
fi
echo "PASS: no crash, hang or sanitizer report"
