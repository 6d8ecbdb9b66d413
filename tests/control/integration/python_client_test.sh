#!/usr/bin/env bash
# The Python client (control/python/dpu_client, built into $DPU_PYTHONPATH) and the example
# scripts of examples/python against the real appliance, with Debian's python3-grpcio:
#  - add_rule.py adds a rule with the version it read (dpuctl sees it);
#  - apply_config.py: an invalid file is refused with every error (exit 4), a valid one
#    applied as the next version;
#  - watch_events.py receives the config event of an apply;
#  - a change based on an old version is a VersionConflict;
#  - the protos also compile with Debian's python3-grpc-tools (protoc 3.6) and the stubs it
#    writes load with Debian's python3-protobuf;
#  - gRPC server reflection answers on v1 and v1alpha (ListServices names dpu.v1.Appliance).
source "$(dirname "$0")/common.sh" "$@"
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
[[ -n ${DPU_PYTHONPATH:-} && -f $DPU_PYTHONPATH/dpu_client/__init__.py ]] \
  || fail "DPU_PYTHONPATH does not hold the built client (ninja python_client): '${DPU_PYTHONPATH:-}'"
$PY -c 'import grpc' 2>/dev/null || fail "python3-grpcio missing (scripts/install-deps.sh installs it)"
export PYTHONPATH=$DPU_PYTHONPATH

CFG=$WORK/config.json
echo '{"firewall": {"rules": [{"id": "no-ntp", "action": "DENY", "protocols": ["udp"], "dst_ports": ["123"]}]}}' >"$CFG"
start_appliance "$WORK/state" --config "$CFG"
EX=$SRC/examples/python

# --- add_rule.py
$PY "$EX/add_rule.py" --server "$APP_ADDR" no-telnet 23 >"$WORK/add.out" 2>&1 || fail "add_rule.py: $(cat "$WORK/add.out")"
grep -q "^version 1 -> 2$" "$WORK/add.out" || fail "add_rule.py output: $(cat "$WORK/add.out")"
grep -q "^no-telnet  *DENY" "$WORK/add.out" || fail "add_rule.py did not list the rule: $(cat "$WORK/add.out")"
ctl --json fw list >"$WORK/fw.json"
[[ $(jq_py "$WORK/fw.json" '[r["rule"]["id"] for r in d["rules"]]') == "['no-ntp', 'no-telnet']" ]] \
  || fail "dpuctl does not see the rule: $(cat "$WORK/fw.json")"

# --- watch_events.py in the background, then apply_config.py
$PY "$EX/watch_events.py" --server "$APP_ADDR" --types config --count 1 >"$WORK/events.out" 2>&1 &
EV_PID=$!
BG_PIDS+=("$EV_PID")
# (the subscription is live once the appliance counts a subscriber; wait for it, no deadline)
until ctl --json stats 2>/dev/null | grep -q '"subscribers": *"\?[1-9]'; do
  kill -0 "$EV_PID" 2>/dev/null || fail "watch_events.py exited: $(cat "$WORK/events.out")"
  sleep 0.2
done
cat >"$WORK/bad.json" <<'J'
{"dataplane": {"flow_table": {"capacity_per_worker": 5}},
 "firewall": {"rules": [{"id": "x", "action": "DENY", "dst_ports": ["99999"]}]}}
J
rc=0
$PY "$EX/apply_config.py" --server "$APP_ADDR" "$WORK/bad.json" >"$WORK/bad.out" 2>&1 || rc=$?
[[ $rc == 4 ]] || fail "apply_config.py of an invalid file: exit $rc: $(cat "$WORK/bad.out")"
grep -q "error: .*capacity_per_worker" "$WORK/bad.out" || fail "error list: $(cat "$WORK/bad.out")"
grep -q "error: .*99999" "$WORK/bad.out" || fail "error list: $(cat "$WORK/bad.out")"
cat >"$WORK/good.json" <<'J'
{"firewall": {"rules": [{"id": "no-ntp", "action": "DENY", "protocols": ["udp"], "dst_ports": ["123"]},
                        {"id": "no-syslog", "action": "DENY", "protocols": ["udp"], "dst_ports": ["514"]}]}}
J
$PY "$EX/apply_config.py" --server "$APP_ADDR" "$WORK/good.json" >"$WORK/good.out" 2>&1 || fail "apply_config.py: $(cat "$WORK/good.out")"
grep -q "^applied as version 3 " "$WORK/good.out" || fail "apply_config.py output: $(cat "$WORK/good.out")"
wait "$EV_PID" || fail "watch_events.py: $(cat "$WORK/events.out")"
grep -q '"event_type": "config"' "$WORK/events.out" || fail "no config event: $(cat "$WORK/events.out")"
grep -q '"version": 3' "$WORK/events.out" || fail "config event of version 3: $(cat "$WORK/events.out")"
pass "examples/python: add a rule, apply a config (refused with every error, then applied), watch events"

# --- the library: a stale version is a VersionConflict; ConfigError lists the errors
$PY - "$APP_ADDR" <<'PYEOF' || fail "dpu_client library checks"
import sys
from dpu_client import Client, ConfigError, VersionConflict
c = Client(sys.argv[1])
cfg, version = c.get_config()
assert version == 3, version
try:
    c.add_firewall_rule({"id": "late", "action": "DENY", "dst_ports": ["25"], "protocols": ["tcp"]},
                        expected_version=1)
    sys.exit("no VersionConflict for a stale version")
except VersionConflict:
    pass
try:
    c.apply_config({"dataplane": {"flow_table": {"capacity_per_worker": 5}}})
    sys.exit("no ConfigError for an invalid config")
except ConfigError as e:
    assert any("capacity_per_worker" in x for x in e.errors), e.errors
assert c.get_config()[1] == 3
assert c.status()["configVersion"] == "3", c.status()
print("library ok")
PYEOF
pass "dpu_client: VersionConflict on a stale version, ConfigError with the field errors"

# --- Debian's python3-grpc-tools compiles the protos
if $PY -c 'import grpc_tools.protoc' 2>/dev/null; then
  mkdir -p "$WORK/gt"
  (cd "$SRC" && $PY -m grpc_tools.protoc -I. -I/usr/include --python_out="$WORK/gt" \
      --grpc_python_out="$WORK/gt" proto/appliance.proto proto/appliance_api.proto) >"$WORK/gt.out" 2>&1 \
    || fail "python3-grpc-tools cannot compile the protos: $(cat "$WORK/gt.out")"
  PYTHONPATH=$WORK/gt $PY -c '
from proto import appliance_api_pb2 as a, appliance_api_pb2_grpc as g
r = a.SetLbBackendRequest(); assert not r.HasField("weight"); r.weight = 0; assert r.HasField("weight")
assert hasattr(g, "ApplianceStub")' || fail "the grpc-tools stubs do not load"
  pass "the protos compile with Debian's python3-grpc-tools"
else
  fail "python3-grpc-tools missing (scripts/install-deps.sh installs it)"
fi

# --- server reflection, v1 and v1alpha
$PY - "$APP_ADDR" "$WORK" <<'PYEOF' || fail "server reflection"
import sys, grpc
from google.protobuf import descriptor_pb2
sys.path.insert(0, sys.argv[2])
# ServerReflectionRequest{list_services: ""} = field 7 (string): tag 0x3a, length 0
# ServerReflectionRequest{file_containing_symbol: "dpu.v1.Appliance"} = field 4
def req(field, text):
    b = text.encode()
    return bytes([field << 3 | 2, len(b)]) + b
def fields(buf):
    i, out = 0, []
    while i < len(buf):
        key = buf[i]; i += 1
        f, wt = key >> 3, key & 7
        assert wt == 2, (f, wt)
        n, shift = 0, 0
        while True:
            b = buf[i]; i += 1
            n |= (b & 0x7f) << shift; shift += 7
            if not b & 0x80: break
        out.append((f, buf[i:i + n])); i += n
    return out
ch = grpc.insecure_channel(sys.argv[1])
for ver in ("v1", "v1alpha"):
    call = ch.stream_stream("/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % ver,
                            request_serializer=lambda x: x, response_deserializer=lambda x: x)
    resps = list(call(iter([req(7, ""), req(4, "dpu.v1.Appliance")])))
    assert len(resps) == 2, (ver, resps)
    # response 1: list_services_response = field 6 { repeated service = 1 { name = 1 } }
    lsr = [v for f, v in fields(resps[0]) if f == 6]
    assert lsr, (ver, "no list_services_response", resps[0])
    names = [fields(s)[0][1].decode() for f, s in fields(lsr[0]) if f == 1]
    assert "dpu.v1.Appliance" in names, (ver, names)
    # response 2: file_descriptor_response = field 4 { repeated bytes file_descriptor_proto = 1 }
    fdr = [v for f, v in fields(resps[1]) if f == 4]
    assert fdr, (ver, "no file_descriptor_response", resps[1])
    files = [descriptor_pb2.FileDescriptorProto.FromString(v) for f, v in fields(fdr[0]) if f == 1]
    assert any(s.name == "Appliance" for fd in files for s in fd.service), (ver, [fd.name for fd in files])
    print(ver, "ok:", ", ".join(names))
PYEOF
pass "server reflection answers on v1 and v1alpha"
stop_appliance
