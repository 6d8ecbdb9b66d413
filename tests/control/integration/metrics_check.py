#!/usr/bin/env python3
"""Checks a /metrics scrape of the running appliance against the gRPC answers around it.

usage: metrics_check.py STATS_BEFORE.json METRICS.txt STATS_AFTER.json FW_LIST.json

STATS_*.json: `dpuctl --json stats` just before and just after the scrape; FW_LIST.json:
`dpuctl --json fw list` after it. Counters must lie between the two GetStats answers (traffic
keeps flowing), gauges that do not move under this traffic must be equal. Every family has
HELP and TYPE; counters, and only counters, end in _total. Prints what it checked; exit 1
with every mismatch.
"""
import json
import re
import sys

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    types, helps, samples = {}, {}, {}
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            _, _, name, typ = line.split(' ', 3)
            types[name] = typ
        elif line.startswith('# HELP '):
            name = line.split(' ', 3)[2]
            helps[name] = line.split(' ', 3)[3] if len(line.split(' ', 3)) > 3 else ''
        elif line and not line.startswith('#'):
            m = SAMPLE.match(line)
            if not m:
                raise SystemExit('unparsable sample line: %r' % line)
            labels = tuple(sorted(LABEL.findall(m.group(3) or '')))
            samples[(m.group(1), labels)] = float(m.group(4))
    return types, helps, samples


def g(d, *path):
    for p in path:
        if isinstance(d, list):
            d = d[p] if p < len(d) else {}
        else:
            d = d.get(p, {} if p != path[-1] else 0)
    return int(d) if isinstance(d, str) else (d or 0)


def main():
    s1 = json.load(open(sys.argv[1]))
    types, helps, samples = parse(open(sys.argv[2]).read())
    s2 = json.load(open(sys.argv[3]))
    fw = json.load(open(sys.argv[4]))
    errors = []
    checked = 0

    for name, typ in types.items():
        if name not in helps or not helps[name]:
            errors.append('%s has no HELP' % name)
        if not name.startswith('dpu_'):
            continue
        if (typ == 'counter') != name.endswith('_total'):
            errors.append('%s is a %s: counters and only counters end in _total' % (name, typ))

    def sample(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        if key not in samples:
            errors.append('missing sample %s%s' % (name, labels))
            return None
        return samples[key]

    def between(name, lo, hi, **labels):
        nonlocal checked
        v = sample(name, **labels)
        if v is None:
            return
        checked += 1
        if not (lo <= v <= hi):
            errors.append('%s%s = %s, GetStats said %s before and %s after' % (name, labels, v, lo, hi))

    def equal(name, want, **labels):
        nonlocal checked
        v = sample(name, **labels)
        if v is None:
            return
        checked += 1
        if v != want:
            errors.append('%s%s = %s, GetStats says %s' % (name, labels, v, want))

    counter_fields = {
        'rx_packets_a': ('dpu_rx_packets_total', {'side': 'A'}),
        'rx_packets_b': ('dpu_rx_packets_total', {'side': 'B'}),
        'tx_packets_a': ('dpu_tx_packets_total', {'side': 'A'}),
        'tx_packets_b': ('dpu_tx_packets_total', {'side': 'B'}),
        'rx_bytes_a': ('dpu_rx_bytes_total', {'side': 'A'}),
        'tx_bytes_b': ('dpu_tx_bytes_total', {'side': 'B'}),
        'forwarded': ('dpu_verdicts_total', {'verdict': 'forward'}),
        'dropped': ('dpu_verdicts_total', {'verdict': 'drop'}),
        'flows_created': ('dpu_flows_created_total', {}),
        'flow_cache_hits': ('dpu_flow_cache_hits_total', {}),
        'non_ip_forwarded': ('dpu_non_ip_forwarded_total', {}),
        'loops': ('dpu_worker_loops_total', {}),
    }
    for wi, w in enumerate(s1.get('workers', [])):
        wid = str(w.get('id', 0))
        c1 = w.get('counters', {})
        c2 = s2['workers'][wi].get('counters', {})
        for field, (name, labels) in counter_fields.items():
            between(name, int(c1.get(field, 0)), int(c2.get(field, 0)), worker=wid, **labels)
        for reason in set(c1.get('drops', {})) | set(c2.get('drops', {})):
            between('dpu_drops_total', int(c1.get('drops', {}).get(reason, 0)),
                    int(c2.get('drops', {}).get(reason, 0)), worker=wid, reason=reason)
        st1 = {s['stage']: s for s in c1.get('stages', [])}
        st2 = {s['stage']: s for s in c2.get('stages', [])}
        for stage in st2:
            between('dpu_stage_packets_total', int(st1.get(stage, {}).get('packets', 0)),
                    int(st2[stage].get('packets', 0)), worker=wid, stage=stage)
        fw1, fw2 = c1.get('firewall', {}), c2.get('firewall', {})
        between('dpu_firewall_verdicts_total', int(fw1.get('denied', 0)), int(fw2.get('denied', 0)),
                worker=wid, action='deny')
        # The replayed capture has a fixed set of flows: the gauge does not move.
        equal('dpu_flows_active', int(c2.get('flows_active', 0)), worker=wid)
        equal('dpu_worker_snapshot_generation', int(s2['workers'][wi].get('generation', 0)), worker=wid)
        # --- ops --- DNS stage counters (map keys -> their own families) and DPI counters.
        dns_names = {
            'messages': ('dpu_dns_messages_total', {}), 'queries': ('dpu_dns_queries_total', {}),
            'malformed': ('dpu_dns_malformed_total', {}),
            'blocked': ('dpu_dns_decisions_total', {'decision': 'blocked'}),
            'allowed': ('dpu_dns_decisions_total', {'decision': 'allowed'}),
            'answers_sent': ('dpu_dns_answers_total', {'result': 'sent'}),
        }
        d1, d2 = c1.get('dns', {}), c2.get('dns', {})
        for key, (name, labels) in dns_names.items():
            between(name, int(d1.get(key, 0)), int(d2.get(key, 0)), worker=wid, **labels)
        p1, p2 = c1.get('dpi', {}), c2.get('dpi', {})
        between('dpu_dpi_scanned_bytes_total', int(p1.get('bytes_scanned', 0)),
                int(p2.get('bytes_scanned', 0)), worker=wid)
        for action, field in (('alert', 'alerts'), ('drop', 'drops'), ('reset', 'resets')):
            between('dpu_dpi_matches_total', int(p1.get(field, 0)), int(p2.get(field, 0)),
                    worker=wid, action=action)
    for pi, p in enumerate(s1.get('ports', [])):
        p2 = s2['ports'][pi]
        for field in ('rx_packets', 'tx_packets', 'rx_bytes', 'tx_bytes'):
            between('dpu_port_%s_total' % field, int(p.get(field, 0)), int(p2.get(field, 0)),
                    side=p['side'], device=p['name'])
    equal('dpu_config_version', int(s2['config_version']))
    equal('dpu_snapshot_generation', int(s2['generation']))
    ca = s2.get('config_applies', {})
    for result, field in (('applied', 'applied'), ('invalid', 'invalid'),
                          ('conflict', 'conflicts'), ('failed', 'failed')):
        equal('dpu_config_applies_total', int(ca.get(field, 0)), result=result)
    equal('dpu_config_apply_duration_seconds_count', int(ca.get('duration_seconds', {}).get('count', 0)))
    for phase in ('version', 'edit', 'validate', 'compile', 'prepare', 'persist'):  # --- ops ---
        equal('dpu_config_refused_total', int(ca.get('refused_by_phase', {}).get(phase, 0)), phase=phase)
    l1 = {l['name']: l for l in s1.get('dns_lists', [])}
    for l in s2.get('dns_lists', []):  # per DNS list, by name
        lab = {'list': l['name'], 'action': l.get('action', '')}
        between('dpu_dns_blocked_total', int(l1.get(l['name'], {}).get('blocked', 0)),
                int(l.get('blocked', 0)), **lab)
        equal('dpu_dns_list_names', int(l.get('names', 0)), **lab)
    for r in fw.get('rules', []):
        rid = r['rule']['id']
        # Per-rule counters are read after the scrape: at most what fw list says.
        v = sample('dpu_firewall_rule_packets_total', rule=rid)
        if v is not None:
            checked += 1
            if v > int(r.get('packets', 0)):
                errors.append('rule %s: %s packets in the metrics, %s in fw list after' % (rid, v, r.get('packets', 0)))
        equal('dpu_firewall_rule_acl_entries', int(r.get('acl_entries', 0)), rule=rid)
    if types.get('dpu_config_apply_duration_seconds') != 'histogram':
        errors.append('dpu_config_apply_duration_seconds is not a histogram')

    for e in errors:
        print('metrics_check: ' + e)
    print('metrics_check: %d samples checked against GetStats / ListFirewallRules, %d families, %d errors'
          % (checked, len(types), len(errors)))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
