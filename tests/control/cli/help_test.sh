#!/usr/bin/env bash
# --help on every command and subcommand of dpuctl and dpu-appliance: exit 0, a usage line
# and examples that show the (sub)command; an unknown option is a usage error (exit 2) that
# points to the help.
# usage: help_test.sh DPU_APPLIANCE DPUCTL
set -uo pipefail
APP=$1
CTL=$2
PY=/usr/bin/python3
FAILS=0
fail() { echo "FAIL help: $*"; FAILS=$((FAILS + 1)); }
USAGE=$($PY "$(dirname "$0")/help_usage.py" "$APP" "$CTL") || { echo "FAIL: help_usage.py"; exit 1; }

check() {  # check BINARY ARGS...: help exits 0 with usage and examples naming ARGS
  local bin=$1
  shift
  local out rc=0
  out=$("$bin" "$@" --help 2>&1) || rc=$?
  local name
  name="$(basename "$bin") $*"
  [[ $rc -eq 0 ]] || fail "'$name --help' exited $rc"
  grep -q "usage:" <<<"$out" || fail "'$name --help' has no usage line"
  local ex
  ex=$(sed -n '/^examples:/,$p' <<<"$out")
  [[ -n $ex ]] || fail "'$name --help' has no examples"
  grep -q "^  $name" <<<"$ex" || fail "'$name --help' has no example of '$name'"
}

n=0
while IFS=$'\t' read -r key opts; do
  case "$key" in
    dpuctl\ *) read -ra w <<<"$key"; check "$CTL" "${w[@]:1}"; n=$((n + 1)) ;;
    dpu-appliance\ *) read -ra w <<<"$key"; check "$APP" "${w[@]:1}"; n=$((n + 1)) ;;
  esac
done <<<"$USAGE"
# The top-level helps.
grep -q "'dpuctl <command> --help'" <<<"$("$CTL" --help)" || fail "dpuctl --help does not point to the command helps"
grep -q "'dpu-appliance <command> --help'" <<<"$("$APP" --help)" || fail "dpu-appliance --help does not point to the command helps"
# Unknown options: exit 2 and the way to the help.
rc=0; "$APP" run --bogus >/dev/null 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "dpu-appliance run --bogus: exit $rc (want 2)"
out=$("$APP" run --bogus 2>&1); grep -q "dpu-appliance run --help" <<<"$out" || fail "run --bogus: $out"
rc=0; "$CTL" stats --bogus >/dev/null 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "dpuctl stats --bogus: exit $rc (want 2)"

if ((FAILS)); then
  echo "help: $FAILS failure(s)"
  exit 1
fi
echo "ok   help: $n commands and subcommands have --help with examples"
