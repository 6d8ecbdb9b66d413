#!/usr/bin/env python3
"""Docs cannot go stale: every example in the docs is a file in examples/ that is loaded.

usage: docs_examples_test.py REPO_ROOT DPU_APPLIANCE

1. In docs/*.md, README.md and examples/README.md, a fenced code block right after a line
   `<!-- example: examples/PATH -->` must equal that file. Blocks of configs and rules
   (```json, ```txtpb, ```rules, ```ini, ```systemd) must have such a line.
2. Every path `examples/...` the docs mention exists.
3. Every config in examples/ (*.json that no config uses as a rule file, *.txtpb) passes
   `dpu-appliance validate`; every rule file, IP set file and GeoIP database in examples/
   is named by one of them (and so loaded by that validation).
4. Every other file in examples/ is of a kind some test covers (see OTHER_FILES).
5. The example captures of the rule-writing guides (REPLAYS): each generator writes its
   capture byte for byte, and replaying the capture through its config gives the verdicts
   committed beside it (the guides quote them).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

CHECKED_LANGS = {'json', 'txtpb', 'rules', 'ini', 'systemd'}
MARKER = re.compile(r'^<!-- example: (examples/\S+) -->\s*$')
FENCE = re.compile(r'^```(\S*)\s*$')
# Covered elsewhere: the pcap and its generator (pcap regression suite, README), the systemd
# unit and its environment file (tests/control/integration/ops_test.sh), the bash completion
# (tests/control/cli/completion_test.sh), provenance notes.
OTHER_FILES = {
    'examples/example.pcap', 'examples/gen_example_pcap.py', 'examples/README.md',
    'examples/systemd/dpu-appliance.service', 'examples/systemd/dpu-appliance.env',
    'examples/bash-completion/dpuctl', 'examples/geoip/SOURCE.txt',
    # Grafana dashboard (and its generator: check_dashboard) and Prometheus alert rules: every
    # metric they query is checked against a live scrape in ops_test.sh (dashboard_check.py).
    'examples/grafana/dpu-appliance.json', 'examples/grafana/gen_dashboard.py',
    'examples/prometheus/dpu-alerts.yml',
    # The Python client's examples: run against a live appliance by python_client_test.sh.
    'examples/python/apply_config.py', 'examples/python/add_rule.py',
    'examples/python/watch_events.py',
}
# (config, capture, its generator, the verdicts of `replay`): docs/dns-guide.md, docs/lb-guide.md.
REPLAYS = [
    ('examples/dns/config.json', 'examples/dns/queries.pcap', 'examples/dns/gen_queries.py',
     'examples/dns/queries.verdicts.jsonl'),
    ('examples/lb/config.json', 'examples/lb/traffic.pcap', 'examples/lb/gen_traffic.py',
     'examples/lb/traffic.verdicts.jsonl'),
]


def docs(root):
    out = [os.path.join(root, 'README.md'), os.path.join(root, 'examples', 'README.md')]
    d = os.path.join(root, 'docs')
    out += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith('.md'))
    return out


def check_blocks(root, errors):
    blocks = 0
    for path in docs(root):
        rel = os.path.relpath(path, root)
        lines = open(path).read().split('\n')
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            lang = m.group(1)
            j = i + 1
            while j < len(lines) and not lines[j].startswith('```'):
                j += 1
            body = '\n'.join(lines[i + 1:j]) + '\n'
            marker = None
            for k in (i - 1, i - 2):
                if k >= 0 and MARKER.match(lines[k]):
                    marker = MARKER.match(lines[k]).group(1)
                    break
            if marker:
                blocks += 1
                f = os.path.join(root, marker)
                if not os.path.isfile(f):
                    errors.append('%s:%d: example %s does not exist' % (rel, i + 1, marker))
                elif open(f).read() != body:
                    errors.append('%s:%d: the block differs from %s (copy the file into the doc)'
                                  % (rel, i + 1, marker))
            elif lang in CHECKED_LANGS:
                errors.append('%s:%d: a ```%s block without <!-- example: examples/... -->: '
                              'make it a file in examples/' % (rel, i + 1, lang))
            i = j + 1
        for n, line in enumerate(lines, 1):
            for p in re.findall(r'(?<![\w/.])(examples/[\w./-]*[\w])', line):
                if not os.path.exists(os.path.join(root, p)):
                    errors.append('%s:%d: %s does not exist' % (rel, n, p))
    return blocks


def referenced_files(cfg_path):
    """Files a JSON config names (rule files, IP set files, GeoIP database), absolute."""
    try:
        doc = json.load(open(cfg_path))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not (set(doc) <= {'version', 'dataplane', 'firewall', 'geoip',
                                                       'dns', 'dpi', 'lb'}):
        return None
    base = os.path.dirname(cfg_path)
    out = []
    fw = doc.get('firewall', {})
    out += fw.get('rule_files', fw.get('ruleFiles', []))
    out += [s['file'] for s in fw.get('ip_sets', fw.get('ipSets', [])) if 'file' in s]
    if doc.get('geoip', {}).get('database'):
        out.append(doc['geoip']['database'])
    for lst in doc.get('dns', {}).get('lists', []):  # DNS list files
        out += lst.get('files', [])
    dpi = doc.get('dpi', {})  # YARA rule files
    out += dpi.get('rule_files', dpi.get('ruleFiles', []))
    return [os.path.abspath(os.path.join(base, p)) for p in out]


def check_examples(root, app, errors):
    ex = os.path.join(root, 'examples')
    files = []
    for d, _, fs in os.walk(ex):
        files += [os.path.abspath(os.path.join(d, f)) for f in fs]
    configs, named = [], set()
    for f in files:
        if f.endswith('.json'):
            refs = referenced_files(f)
            if refs is not None:
                configs.append(f)
                named.update(refs)
        elif f.endswith(('.txtpb', '.textproto', '.pbtxt')):
            configs.append(f)
    configs = [c for c in configs if c not in named]
    for c in sorted(configs):
        r = subprocess.run([app, 'validate', '--config', c], capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.strip().endswith(': ok'):
            errors.append('%s does not validate: %s' % (os.path.relpath(c, root),
                                                        (r.stdout + r.stderr).strip()))
    for n in sorted(named):
        if not os.path.exists(n):
            errors.append('a config in examples/ names %s, which does not exist' % n)
    replayed = {p for r in REPLAYS for p in r[1:]}
    for f in sorted(files):
        rel = os.path.relpath(f, os.path.abspath(root))
        if f in configs or f in named or rel in OTHER_FILES or rel in replayed:
            continue
        errors.append('%s: no test loads it (name it in a config in examples/, or add its '
                      'check and list it in OTHER_FILES)' % rel)
    return configs, named


def check_replays(root, app, errors):
    """Each capture is what its generator writes, and replays to the committed verdicts."""
    with tempfile.TemporaryDirectory() as tmp:
        for n, (cfg, pcap, gen, want) in enumerate(REPLAYS):
            fresh = os.path.join(tmp, '%d.pcap' % n)
            r = subprocess.run(['/usr/bin/python3', os.path.join(root, gen), fresh],
                               capture_output=True, text=True)
            if r.returncode != 0:
                errors.append('%s failed: %s' % (gen, (r.stdout + r.stderr).strip()))
            elif open(fresh, 'rb').read() != open(os.path.join(root, pcap), 'rb').read():
                errors.append('%s differs from what %s writes now (run it again)' % (pcap, gen))
            got = os.path.join(tmp, '%d.jsonl' % n)
            r = subprocess.run([app, 'replay', '--config', os.path.join(root, cfg), '--in',
                                os.path.join(root, pcap), '--verdicts', got, '--quiet'],
                               capture_output=True, text=True)
            if r.returncode != 0:
                errors.append('replay of %s with %s failed: %s'
                              % (pcap, cfg, (r.stdout + r.stderr).strip()))
                continue
            a = open(os.path.join(root, want)).read().splitlines()
            b = open(got).read().splitlines()
            if a != b:
                diff = [i for i in range(max(len(a), len(b)))
                        if i >= len(a) or i >= len(b) or a[i] != b[i]]
                errors.append('replay of %s with %s: %d verdicts differ from %s, first: %s'
                              % (pcap, cfg, len(diff), want,
                                 b[diff[0]] if diff[0] < len(b) else '(missing)'))
    return len(REPLAYS)


def check_dashboard(root, errors):
    """The committed Grafana dashboard is what its generator writes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'dashboard.json')
        gen = os.path.join(root, 'examples/grafana/gen_dashboard.py')
        r = subprocess.run(['/usr/bin/python3', gen, out], capture_output=True, text=True)
        if r.returncode != 0:
            errors.append('%s failed: %s' % (gen, (r.stdout + r.stderr).strip()))
        elif open(out, 'rb').read() != open(os.path.join(
                root, 'examples/grafana/dpu-appliance.json'), 'rb').read():
            errors.append('examples/grafana/dpu-appliance.json differs from what '
                          'gen_dashboard.py writes now (run it again)')


def main():
    root, app = sys.argv[1:3]
    errors = []
    blocks = check_blocks(root, errors)
    check_dashboard(root, errors)
    configs, named = check_examples(root, app, errors)
    replays = check_replays(root, app, errors)
    for e in errors:
        print('docs_examples: ' + e)
    print('docs_examples: %d doc blocks match their example files; %d example configs '
          'validate, loading %d rule/set/list/database files; %d example captures replay '
          'to their verdicts; %d errors'
          % (blocks, len(configs), len(named), replays, len(errors)))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
