# Sourced by the bench scripts that start DPDK programs (dpu-appliance, dpdk-testpmd) with
# file prefixes of their own. EAL makes a runtime directory per file prefix (DPDK 22.11:
# /var/run/dpdk/<prefix> for root, else $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk); dpu-appliance
# removes its own at a clean exit but cannot when it is killed, dpdk-testpmd never does.
#   eal_dirs_track PREFIX   remember a prefix this script uses (before starting the program;
#                           a glob such as "fwdb_*_$$_*" covers several)
#   eal_dirs_cleanup        remove the runtime directories of every tracked prefix; call it
#                           from the EXIT trap once the programs have exited
EAL_DIRS_TRACKED=()
eal_dirs_track() { EAL_DIRS_TRACKED+=("$1"); }
eal_dirs_cleanup() {
  local base=/var/run/dpdk p
  [[ $(id -u) -eq 0 ]] || base=${XDG_RUNTIME_DIR:-/tmp}/dpdk
  for p in "${EAL_DIRS_TRACKED[@]:-}"; do
    # shellcheck disable=SC2086  # $p may be a glob
    [[ -n $p ]] && rm -rf -- "${base:?}"/$p
  done
  return 0
}
