"""dpu_client: a thin Python client of the dpu-appliance gRPC API (dpu.v1.Appliance).

The generated stubs (appliance_pb2, appliance_api_pb2, appliance_api_pb2_grpc) come from
proto/ at build time (part of the normal build: build/python/dpu_client, made with Debian's
protoc and grpc_python_plugin) and sit in this package's `_generated` directory; the helpers below
cover the common workflows, and `Client.stub` is the full API.

    from dpu_client import Client
    c = Client("unix:/var/lib/dpu-appliance/api.sock")
    cfg, version = c.get_config()
    c.add_firewall_rule({"id": "ssh-block", "action": "DENY", "protocols": ["tcp"],
                         "dst": ["192.0.2.0/24"], "dst_ports": ["22"], "priority": 10})
    for ev in c.watch_events(["drop"]):
        print(ev["event_type"], ev.get("drop"))

Errors are grpc.RpcError; ConfigError adds the per-field error list of an invalid config
(INVALID_ARGUMENT with dpu.v1.ConfigErrors details) and VersionConflict (ABORTED: the
committed version moved; read the config again and retry).
Needs Debian's python3-grpcio and python3-protobuf.
"""
import json
import os
import sys

import grpc
from google.protobuf import json_format

_GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_generated")
if _GEN not in sys.path:
    sys.path.insert(0, _GEN)

# (generated with -I<repo>: the modules are proto/<name>_pb2.py, as appliance_api imports
# "proto/appliance.proto")
from proto import appliance_api_pb2 as api_pb2  # noqa: E402
from proto import appliance_api_pb2_grpc as api_grpc  # noqa: E402
from proto import appliance_pb2 as config_pb2  # noqa: E402

__all__ = ["Client", "ConfigError", "VersionConflict", "format_error", "api_pb2", "config_pb2", "api_grpc"]

DEFAULT_SERVER = "unix:/var/lib/dpu-appliance/api.sock"


class ConfigError(Exception):
    """An invalid configuration or change: `errors` lists every error (field path, rule, reason)."""

    def __init__(self, message, errors):
        super().__init__(message + "".join("\n  error: " + e for e in errors))
        self.errors = errors


class VersionConflict(Exception):
    """The committed version is not the expected one (someone else changed the config)."""


def _to_message(value, cls):
    if isinstance(value, cls):
        return value
    msg = cls()
    if isinstance(value, str):
        json_format.Parse(value, msg)
    else:
        json_format.ParseDict(value, msg)
    return msg


def format_error(e):
    """One ConfigError as a line, as dpuctl prints it: FILE:LINE: rule 'ID': FIELD: reason."""
    s = ""
    if e.file:
        s += e.file + (":%d" % e.line if e.line > 0 else "") + ": "
    if e.rule:
        s += "rule '%s': " % e.rule
    if e.field:
        s += e.field + ("[%d]" % e.index if e.index >= 0 and not e.rule else "") + ": "
    elif e.section:
        s += e.section + ": "
    return s + e.reason


def _config_errors(err):
    """The dpu.v1.ConfigErrors in a status's details (grpc-status-details-bin), as lines."""
    out = []
    for key, value in (err.trailing_metadata() or ()):
        if key != "grpc-status-details-bin":
            continue
        st = api_pb2.RpcStatus.FromString(value)
        for any_msg in st.details:
            errs = api_pb2.ConfigErrors()
            if any_msg.Unpack(errs):
                out += [format_error(e) for e in errs.errors]
    return out


class Client:
    """One channel to the appliance. `target`: "unix:/path/api.sock" or "HOST:PORT"
    (default $DPUCTL_SERVER, else unix:/var/lib/dpu-appliance/api.sock). `credentials`:
    grpc.ssl_channel_credentials(...) for a TLS endpoint. `timeout`: seconds per call, None
    (the default) waits as long as the call takes (a large apply can take seconds)."""

    def __init__(self, target=None, credentials=None, timeout=None):
        target = target or os.environ.get("DPUCTL_SERVER") or DEFAULT_SERVER
        if target.startswith("/"):
            target = "unix:" + target
        self.target = target
        self.timeout = timeout
        self.channel = (grpc.secure_channel(target, credentials) if credentials
                        else grpc.insecure_channel(target))
        self.stub = api_grpc.ApplianceStub(self.channel)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, rpc, request):
        try:
            return rpc(request, timeout=self.timeout)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.ABORTED:
                raise VersionConflict(e.details()) from e
            if e.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise ConfigError(e.details(), _config_errors(e)) from e
            raise

    @staticmethod
    def to_dict(msg):
        """A response message as a dict (protobuf JSON mapping, lowerCamelCase names)."""
        return json_format.MessageToDict(msg)

    # --- reading
    def status(self):
        return self.to_dict(self._call(self.stub.GetStatus, api_pb2.GetStatusRequest()))

    def stats(self):
        return self.to_dict(self._call(self.stub.GetStats, api_pb2.GetStatsRequest()))

    def get_config(self):
        """(config as a dict, committed version)."""
        r = self._call(self.stub.GetConfig, api_pb2.GetConfigRequest())
        return self.to_dict(r.config), r.config.version

    def firewall_rules(self):
        r = self._call(self.stub.ListFirewallRules, api_pb2.ListFirewallRulesRequest())
        return self.to_dict(r).get("rules", [])

    # --- changing (each returns the ApplyConfigResponse as a dict: version, generation, ...)
    def validate_config(self, config):
        """Every error of `config` (dict, JSON text or ApplianceConfig), [] when valid."""
        req = api_pb2.ValidateConfigRequest(config=_to_message(config, config_pb2.ApplianceConfig))
        r = self._call(self.stub.ValidateConfig, req)
        return [format_error(e) for e in r.errors]

    def apply_config(self, config, expected_version=None):
        """Replaces the whole config. expected_version None = the version read now (so a
        change made meanwhile by someone else is not overwritten silently)."""
        if expected_version is None:
            expected_version = self.get_config()[1]
        req = api_pb2.ApplyConfigRequest(
            config=_to_message(config, config_pb2.ApplianceConfig),
            expected_version=expected_version)
        return self.to_dict(self._call(self.stub.ApplyConfig, req))

    def add_firewall_rule(self, rule, expected_version=None, before_id=None, after_id=None):
        """Adds a FirewallRule (dict in the config file's JSON form, or the message)."""
        req = api_pb2.AddFirewallRuleRequest(rule=_to_message(rule, config_pb2.FirewallRule))
        if before_id:
            req.before_id = before_id
        elif after_id:
            req.after_id = after_id
        if expected_version is None:
            req.force = True
        else:
            req.expected_version = expected_version
        return self.to_dict(self._call(self.stub.AddFirewallRule, req))

    def remove_firewall_rule(self, rule_id, expected_version=None):
        req = api_pb2.RemoveFirewallRuleRequest(id=rule_id)
        if expected_version is None:
            req.force = True
        else:
            req.expected_version = expected_version
        return self.to_dict(self._call(self.stub.RemoveFirewallRule, req))

    # --- streams
    def watch_events(self, types=(), buffer_size=0):
        """Yields events as dicts (eve.json-like fields) until the channel closes or the
        caller stops iterating. types: "drop", "flow", "config", "alert", "lb", "dns"."""
        req = api_pb2.WatchEventsRequest(types=list(types), buffer_size=buffer_size)
        call = self.stub.WatchEvents(req)
        try:
            for ev in call:
                d = self.to_dict(ev)
                if ev.json:
                    try:
                        d["eve"] = json.loads(ev.json)
                    except ValueError:
                        pass
                yield d
        finally:
            call.cancel()
