#!/usr/bin/python3
"""Writes examples/grafana/dpu-appliance.json, the Grafana dashboard of dpu-appliance.

Run: /usr/bin/python3 examples/grafana/gen_dashboard.py [OUT]   (default: beside this script)
Every query's metric names are checked in CI against a live scrape of the appliance
(tests/control/integration/dashboard_check.py, run by integration_ops)."""
import json
import os
import sys

panels = []
next_id = [0]


def sel(extra=""):
    return '{instance=~"$instance"%s}' % (("," + extra) if extra else "")


def panel(title, exprs, unit, x, y, w, h, kind="timeseries", desc=""):
    next_id[0] += 1
    ds = {"type": "prometheus", "uid": "${datasource}"}
    panels.append({
        "id": next_id[0], "type": kind, "title": title, "description": desc,
        "datasource": ds, "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
        "targets": [{"datasource": ds, "expr": e, "legendFormat": l, "refId": chr(65 + i)}
                    for i, (e, l) in enumerate(exprs)],
    })


def row(title, y):
    next_id[0] += 1
    panels.append({"id": next_id[0], "type": "row", "title": title, "collapsed": False,
                   "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})


def rate(metric, by="", window="1m", extra=""):
    inner = f"rate({metric}{sel(extra)}[{window}])"
    return f"sum by ({by}) ({inner})" if by else f"sum({inner})"


y = 0
row("Traffic", y); y += 1
panel("Packets per second by port side",
      [(rate("dpu_port_rx_packets_total", "side"), "rx {{side}}"),
       (rate("dpu_port_tx_packets_total", "side"), "tx {{side}}")], "pps", 0, y, 8, 8,
      desc="DPDK port counters of side A and side B.")
panel("Bits per second by port side",
      [("8 * " + rate("dpu_port_rx_bytes_total", "side"), "rx {{side}}"),
       ("8 * " + rate("dpu_port_tx_bytes_total", "side"), "tx {{side}}")], "bps", 8, y, 8, 8)
panel("Lost before the workers (overload)",
      [(rate("dpu_port_rx_missed_total"), "rx missed"),
       (rate("dpu_port_rx_nombuf_total"), "no mbuf")], "pps", 16, y, 8, 8,
      desc="Frames the NIC dropped because the workers did not keep up, or the mbuf pool ran dry.")
y += 8
row("Verdicts and drops", y); y += 1
panel("Verdicts per second", [(rate("dpu_verdicts_total", "verdict"), "{{verdict}}")],
      "pps", 0, y, 12, 8)
panel("Drops per second by reason", [(rate("dpu_drops_total", "reason") + " > 0", "{{reason}}")],
      "pps", 12, y, 12, 8, desc="Every drop has a reason; the stage guides in docs/ explain each.")
y += 8
panel("Packets per stage", [(rate("dpu_stage_packets_total", "stage"), "{{stage}}")],
      "pps", 0, y, 12, 8)
panel("Drops per stage", [(rate("dpu_stage_dropped_total", "stage"), "{{stage}}")],
      "pps", 12, y, 12, 8)
y += 8
row("Flows", y); y += 1
panel("Active flows", [(f"sum(dpu_flows_active{sel()})", "active")], "short", 0, y, 8, 8)
panel("New flows per second", [(rate("dpu_flows_created_total"), "created")], "short", 8, y, 8, 8)
panel("Flow table full (5 min)",
      [(f"sum(increase(dpu_flow_table_full_total{sel()}[5m]))", "new flows without a slot")],
      "short", 16, y, 8, 8, desc="New flows that found no slot: the flow-table-full policy applied.")
y += 8
row("Firewall", y); y += 1
panel("Firewall verdicts", [(rate("dpu_firewall_verdicts_total", "action"), "{{action}}")],
      "pps", 0, y, 8, 8)
panel("Top 10 rules by packets",
      [(f"topk(10, rate(dpu_firewall_rule_packets_total{sel()}[5m]))", "{{rule}}")],
      "pps", 8, y, 8, 8)
panel("Reject replies sent", [(rate("dpu_firewall_reject_replies_total", "kind"), "{{kind}}")],
      "pps", 16, y, 8, 8)
y += 8
row("DNS filter", y); y += 1
panel("DNS blocked per list",
      [(rate("dpu_dns_blocked_total", "list, action", "5m"), "{{list}} ({{action}})")],
      "short", 0, y, 8, 8)
panel("DNS decisions", [(rate("dpu_dns_decisions_total", "decision"), "{{decision}}")],
      "short", 8, y, 8, 8)
panel("Names per DNS list", [(f"dpu_dns_list_names{sel()}", "{{list}}")], "short", 16, y, 8, 8,
      kind="stat")
y += 8
row("DPI (YARA)", y); y += 1
panel("DPI rule matches by action",
      [(rate("dpu_dpi_matches_total", "action", "5m"), "{{action}}")], "short", 0, y, 8, 8)
panel("DPI inspected bits per second",
      [("8 * " + rate("dpu_dpi_scanned_bytes_total"), "scanned")], "bps", 8, y, 8, 8)
panel("DPI directions not fully inspected",
      [(rate("dpu_dpi_gaps_total", window="5m"), "gaps"),
       (rate("dpu_dpi_streams_not_inspected_total", window="5m"), "no stream slot"),
       (rate("dpu_dpi_depth_reached_total", window="5m"), "depth reached")], "short", 16, y, 8, 8,
      desc="Above zero: traffic the DPI stage did not see whole; check the dpi sizing and gap_policy.")
y += 8
row("Normalization (fragments, TCP streams)", y); y += 1
panel("Fragmented datagrams reassembled for inspection",
      [(rate("dpu_fragment_reassembled_datagrams_total", window="5m"), "reassembled"),
       (rate("dpu_fragment_reassembly_overlaps_total", "data", "5m"), "overlaps ({{data}} data)")],
      "short", 0, y, 8, 8,
      desc="Datagrams the DNS filter and DPI read whole; overlaps with different data follow "
           "dataplane.fragments.overlapping.")
panel("Reassembly exhausted",
      [(rate("dpu_fragment_reassembly_exhausted_total", "cause", "5m"), "{{cause}}"),
       (rate("dpu_fragment_reassembly_fail_policy_total", "policy", "5m"), "fail {{policy}}")],
      "short", 8, y, 8, 8,
      desc="Above zero: datagrams that could not be reassembled; fail open forwards them "
           "uninspected. Size dataplane.fragments.reassembly_buffers.")
panel("TCP stream normalization",
      [(rate("dpu_tcp_stream_total", "counter", "5m", 'counter!="segments",counter!="checksums_software"'),
        "{{counter}}")], "short", 16, y, 8, 8,
      desc="Segments dropped (bad checksum, out of order, overlap with different data, fail "
           "closed), passed unverified, directions without a window, data on SYN.")
y += 8
row("Load balancer", y); y += 1
panel("Active flows per backend",
      [(f"sum by (service, backend) (dpu_lb_backend_active_flows{sel()})",
        "{{service}}/{{backend}}")], "short", 0, y, 12, 8,
      desc="Drain a backend until this reaches 0 before removing it.")
panel("Packets per second per backend",
      [(rate("dpu_lb_backend_packets_total", "service, backend"), "{{service}}/{{backend}}")],
      "pps", 12, y, 12, 8)
y += 8
row("Workers and control plane", y); y += 1
idle = sel('bucket="idle"')
panel("Busy share of each worker core",
      [(f"1 - (rate(dpu_worker_cycles_total{idle}[1m]) / on(instance, worker) group_left "
        f"dpu_worker_tsc_hertz{sel()})", "worker {{worker}}")], "percentunit", 0, y, 8, 8)
panel("Forwarding latency",
      [(f"max by (quantile) (dpu_forward_latency_seconds{sel()})", "p{{quantile}}"),
       (f"max(dpu_forward_latency_max_seconds{sel()})", "max")], "s", 8, y, 8, 8)
panel("Config applies (1 h)",
      [(f"sum by (result) (increase(dpu_config_applies_total{sel()}[1h]))", "{{result}}"),
       (f"sum by (phase) (increase(dpu_config_refused_total{sel()}[1h]))", "refused in {{phase}}")],
      "short", 16, y, 8, 8)

dash = {
    "title": "dpu-appliance", "uid": "dpu-appliance", "tags": ["dpu", "dpdk", "firewall"],
    "timezone": "utc", "schemaVersion": 38, "version": 1, "refresh": "10s",
    "time": {"from": "now-1h", "to": "now"},
    "description": "Inline appliance overview: traffic, verdicts and drop reasons, flows, "
                   "firewall, DNS filter, DPI, load balancer, workers.",
    "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
        {"name": "instance", "type": "query", "label": "appliance",
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": "label_values(dpu_build_info, instance)", "refresh": 2,
         "includeAll": True, "multi": True, "allValue": ".*"}]},
    "panels": panels,
}
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "dpu-appliance.json")
with open(out, "w") as f:
    json.dump(dash, f, indent=2)
    f.write("\n")
