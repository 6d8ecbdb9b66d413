#!/usr/bin/env bash
# examples/bash-completion/dpuctl, sourced in a clean bash: commands, subcommands, options,
# option values and files complete; and every command, subcommand and option the --help
# texts name is offered (help_usage.py reads them from the binaries), so the completion
# cannot fall behind the CLI.
# usage: completion_test.sh DPU_APPLIANCE DPUCTL
set -uo pipefail
APP=$1
CTL=$2
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
PY=/usr/bin/python3
FAILS=0
fail() { echo "FAIL completion: $*"; FAILS=$((FAILS + 1)); }

# shellcheck source=/dev/null
source "$SRC/examples/bash-completion/dpuctl"
[[ $(complete -p dpuctl) == "complete -F _dpuctl dpuctl" ]] || fail "dpuctl not registered"
[[ $(complete -p dpu-appliance) == "complete -F _dpu_appliance dpu-appliance" ]] || fail "dpu-appliance not registered"

# comp FUNC WORD... : what FUNC offers for the last WORD (sorted, one line).
comp() {
  local fn=$1
  shift
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMP_LINE="$*"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  "$fn"
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
expect() {  # expect "WANT" FUNC WORD...
  local want=$1
  shift
  local got
  got=$(comp "$@")
  [[ $got == "$want" ]] || fail "'${*:2}': got '$got', want '$want'"
}

expect "capture config dns dpi events explain fleet flows fw geo lb stats status" _dpuctl dpuctl ""
expect "established" _dpuctl dpuctl flows --state est  # --- flows view ---
expect "draining" _dpuctl dpuctl lb set web b1 --state dr
expect "last-seen" _dpuctl dpuctl flows --sort l
expect "bytes" _dpuctl dpuctl flows --top 5 --by b
expect "--drops --duration" _dpuctl dpuctl capture --d  # --- capture ---
expect "firewall_deny firewall_reject" _dpuctl dpuctl capture --drops --reason firewall
expect "--help action add create delete list remove show" _dpuctl dpuctl dpi ""  # --- dpi ---
expect "--help add create delete list remove show" _dpuctl dpuctl dns ""
expect "--help add create delete list remove set show" _dpuctl dpuctl lb ""
expect "default drop" _dpuctl dpuctl dpi action incident-42:exfil d
expect "" _dpuctl dpuctl dpi action d
expect "nodata nxdomain" _dpuctl dpuctl dns create blocked --action n
expect "adblock" _dpuctl dpuctl dns create blocked --format ad
expect "nat" _dpuctl dpuctl lb create web --mode n
expect "rehash reset" _dpuctl dpuctl lb create web --orphans re
expect "--dns-query" _dpuctl dpuctl explain --dns
expect "AAAA" _dpuctl dpuctl explain --dns-query x.example --qtype AA
expect "fleet flows fw" _dpuctl dpuctl f
expect "--json" _dpuctl dpuctl --j
expect "--help add list load remove" _dpuctl dpuctl fw ""
expect "apply" _dpuctl dpuctl --server unix:/x.sock config a
expect "apply" _dpuctl dpuctl --json --timeout 3 config ap
expect "--expected-version" _dpuctl dpuctl config apply --ex
expect "--after" _dpuctl dpuctl fw add "deny tcp any any -> any 22 id x" --af
expect "dns drop drop,config drop,flow" _dpuctl dpuctl events --types d
expect "lb" _dpuctl dpuctl events --types l
expect "A B" _dpuctl dpuctl explain --side ""
expect "draining" _dpuctl dpuctl lb set web be1 --state dr
expect "icmp icmpv6" _dpuctl dpuctl explain --proto ic
expect "--watch" _dpuctl dpuctl stats --wa
expect "" _dpuctl dpuctl stats --interval ""
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
touch "$TMPD/site.rules" "$TMPD/site.json"
expect "$TMPD/site.json $TMPD/site.rules" _dpuctl dpuctl config apply "$TMPD/si"
expect "$TMPD/site.rules" _dpuctl dpuctl fw load "$TMPD/site.r"
expect "$TMPD/site.json" _dpuctl dpuctl lb create api --file "$TMPD/site.j"
# Rule ids come from the server; none answers here: nothing, quickly.
start=$(date +%s)
expect "" _dpuctl "$CTL" --server unix:"$TMPD"/none.sock fw remove ""
(( $(date +%s) - start < 10 )) || fail "rule id completion hangs without a server"
expect "--help replay run validate" _dpu_appliance dpu-appliance ""
expect "--metrics-listen --metrics-listen-any" _dpu_appliance dpu-appliance run --metrics
expect "busy idle" _dpu_appliance dpu-appliance run --poll ""
expect "--poll" _dpu_appliance dpu-appliance run --pol
expect "--help apply diff history rollback rollout show status" _dpuctl dpuctl fleet ""
expect "$TMPD/site.json" _dpu_appliance dpu-appliance replay --config "$TMPD/site.j"
expect "$TMPD/site.json" _dpu_appliance dpu-appliance run -- --vdev "$TMPD/site.j"

# Everything the help texts name is offered.
USAGE=$($PY "$(dirname "$0")/help_usage.py" "$APP" "$CTL") || { echo "FAIL: help_usage.py"; exit 1; }
n=0
while IFS=$'\t' read -r key opts; do
  case "$key" in
    dpuctl-commands)
      got=$(comp _dpuctl dpuctl "")
      for c in $opts; do [[ " $got " == *" $c "* ]] || fail "command '$c' (dpuctl --help) not completed"; done ;;
    dpuctl)
      got=$(comp _dpuctl dpuctl --)
      for o in $opts; do [[ " $got " == *" $o "* ]] || fail "global option $o not completed"; done ;;
    dpuctl\ *)
      read -ra words <<<"$key"
      if ((${#words[@]} == 3)); then
        got=$(comp _dpuctl dpuctl "${words[1]}" "")
        [[ " $got " == *" ${words[2]} "* ]] || fail "subcommand '$key' not completed (got '$got')"
      fi
      got=$(comp _dpuctl "${words[@]}" --)
      for o in $opts; do [[ " $got " == *" $o "* ]] || fail "'$key $o' (in its --help) not completed"; done ;;
    dpu-appliance\ *)
      read -ra words <<<"$key"
      got=$(comp _dpu_appliance "${words[@]}" --)
      for o in $opts; do [[ " $got " == *" $o "* ]] || fail "'$key $o' (in its --help) not completed"; done ;;
  esac
  n=$((n + 1))
done <<<"$USAGE"
((n > 15)) || fail "help_usage.py found only $n command keys"

if ((FAILS)); then
  echo "completion: $FAILS failure(s)"
  exit 1
fi
echo "ok   completion: $n command keys from the --help texts all complete"
