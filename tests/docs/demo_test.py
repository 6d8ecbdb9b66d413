#!/usr/bin/python3
"""The demo of the README (`scripts/demo.sh`) shows what its generator meant it to show.

usage: demo_test.py REPO_ROOT DPU_APPLIANCE

1. examples/gen_example.py writes examples/example.pcap byte for byte (the committed capture
   is the generator's).
2. `dpu-appliance replay` of it with examples/config.json, checked against the generator's
   INTENT (which packets are what), not against a recorded output:
   - the SSH attempt: every SYN dropped by firewall rule ssh-block, one flow;
   - the telnet attempt: rejected by rule telnet-reject, a TCP reset sent back to the client;
   - the blocked name: the query does not pass, the appliance answers NXDOMAIN for it;
     the allowed name's query and answer pass;
   - the EICAR download: reset by the YARA rule EICAR_test_file;
   - the sqlmap request: an alert of rule sqlmap_scanner, forwarded;
   - the web service's flows: every packet leaves NATed to a backend, more than one backend
     is used;
   - the plain traffic: forwarded.
3. The summary opens with the headline (before "details") that says the same: the rule
   that denied the SSH flow and how many packets, the rejecting rule, the blocked name with
   its list and NXDOMAIN, the YARA rules that matched with their action, the flows per
   backend.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

from scapy.all import DNS, IP, TCP, rdpcap
from scapy.all import conf as scapy_conf

scapy_conf.verb = 0
errors = []


def check(cond, what):
    if not cond:
        errors.append(what)
    return cond


def main():
    root, app = sys.argv[1:3]
    spec = importlib.util.spec_from_file_location('gen_example',
                                                  os.path.join(root, 'examples', 'gen_example.py'))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = os.path.join(tmp, 'fresh.pcap')
        subprocess.run(['/usr/bin/python3', os.path.join(root, 'examples', 'gen_example.py'),
                        fresh], check=True)
        check(open(fresh, 'rb').read() ==
              open(os.path.join(root, 'examples', 'example.pcap'), 'rb').read(),
              'examples/example.pcap differs from what examples/gen_example.py writes')
        gen.build()  # fills gen.INTENT with the packets' indexes
        intent = gen.INTENT
        r = subprocess.run([app, 'replay', '--config', os.path.join(root, 'examples', 'config.json'),
                            '--in', os.path.join(root, 'examples', 'example.pcap'),
                            '--out', os.path.join(tmp, 'b.pcap'), '--out-a',
                            os.path.join(tmp, 'a.pcap'), '--verdicts', os.path.join(tmp, 'v.jsonl'),
                            '--events', os.path.join(tmp, 'e.jsonl')],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print('demo: replay failed: ' + r.stdout + r.stderr)
            return 1
        summary = r.stdout
        verdicts = [json.loads(l) for l in open(os.path.join(tmp, 'v.jsonl'))]
        events = [json.loads(l) for l in open(os.path.join(tmp, 'e.jsonl'))]
        out_a = rdpcap(os.path.join(tmp, 'a.pcap'))
        out_b = rdpcap(os.path.join(tmp, 'b.pcap'))
    v = {x['index']: x for x in verdicts}

    # --- the verdicts, packet by packet ---
    fw = intent['firewall_deny']
    check(len(fw['packets']) == 3, 'the generator wrote %d SSH SYNs' % len(fw['packets']))
    for i in fw['packets']:
        check(v[i]['verdict'] == 'drop' and v[i]['stage'] == 'firewall' and
              v[i]['rule'] == fw['rule'] and v[i]['reason'] == 'firewall_deny',
              'SSH packet %d: %s (want drop by firewall rule %s)' % (i, v[i], fw['rule']))
    check(len({v[i]['flow_id'] for i in fw['packets']}) == fw['flows'],
          'the SSH SYNs are not one flow')
    rej = intent['firewall_reject']
    for i in rej['packets']:
        check(v[i]['verdict'] == 'reject' and v[i]['rule'] == rej['rule'],
              'telnet packet %d: %s (want reject by rule %s)' % (i, v[i], rej['rule']))
    check(any(p.haslayer(TCP) and p[IP].src == rej['server'] and p[TCP].sport == rej['dport'] and
              'R' in str(p[TCP].flags) for p in out_a),
          'no TCP reset from %s:%d sent back to side A' % (rej['server'], rej['dport']))
    blk = intent['dns_blocked']
    for i in blk['packets']:
        check(v[i]['verdict'] != 'forward' and v[i]['stage'] == 'dns',
              'blocked DNS query %d: %s (want it stopped by the DNS stage)' % (i, v[i]))
    answers = [p[DNS] for p in out_a if p.haslayer(DNS) and p[DNS].qr == 1]
    check(any(a.rcode == blk['rcode'] and a.qd is not None and
              a.qd.qname.decode().rstrip('.') == blk['name'] for a in answers),
          'no NXDOMAIN answer for %s sent back to side A (answers: %s)'
          % (blk['name'], [a.summary() for a in answers]))
    for i in intent['dns_allowed']['packets'] + intent['allowed']['packets']:
        check(v[i]['verdict'] == 'forward', 'allowed packet %d: %s' % (i, v[i]))
    rst = intent['dpi_reset']
    hits = [v[i] for i in rst['packets'] if v[i]['stage'] == 'dpi']
    check(hits and hits[0]['rule'].endswith(':' + rst['rule']) and
          hits[0]['verdict'] in ('reject', 'drop'),
          'EICAR download: no packet reset by rule %s (%s)' % (rst['rule'], hits))
    alert = intent['dpi_alert']
    for i in alert['packets']:
        check(v[i]['verdict'] == 'forward', 'sqlmap packet %d: %s (an alert forwards)' % (i, v[i]))
    check(any(e['event_type'] == 'alert' and e['alert']['rule'].endswith(':' + alert['rule'])
              for e in events), 'no alert event of rule %s' % alert['rule'])
    lb = intent['lb']
    for i in lb['packets']:
        # The verdict names the backend by its id.
        check(v[i]['verdict'] == 'forward' and v[i]['backend'] in lb['backends'],
              'web service packet %d: %s (want forwarded to one of %s)' % (i, v[i], lb['backends']))
    check(len({v[i]['flow_id'] for i in lb['packets']}) == lb['flows'], 'web flows')
    # What left side B: every packet to the service went to a backend's address (NAT), and
    # the flows went to more than one backend.
    to_vip = [p for p in out_b if p.haslayer(IP) and p[IP].dst == lb['vip']]
    to_backends = [p for p in out_b if p.haslayer(TCP) and p[IP].dst in lb['addresses'] and
                   p[TCP].dport == lb['port']]
    check(not to_vip and len(to_backends) == len(lb['packets']),
          '%d packets left for the service address, %d for its backends (want 0 and %d)'
          % (len(to_vip), len(to_backends), len(lb['packets'])))
    used = {p[IP].dst for p in to_backends}
    check(len(used) > 1, 'the web flows all went to one backend: %s' % used)

    # --- the headline ---
    head, sep, _ = summary.partition('\ndetails\n')
    check(sep, 'no "details" line after the headline:\n' + summary)
    check('what happened: %d packets in' % len(verdicts) in head,
          'the headline does not open with the packets in:\n' + head)
    check(re.search(r'^  firewall +denied 1 flow \(%d packets\) by rule %s: "'
                    % (len(fw['packets']), fw['rule']), head, re.M),
          'headline: no line for the SSH flow denied by %s:\n%s' % (fw['rule'], head))
    check(re.search(r'^  firewall +rejected 1 flow \(1 packet\) by rule %s' % rej['rule'], head, re.M),
          'headline: no line for rule %s:\n%s' % (rej['rule'], head))
    check(re.search(r'^  dns +blocked %s \(1 query\): list %s, answered NXDOMAIN$'
                    % (re.escape(blk['name']), blk['list']), head, re.M),
          'headline: no line for the blocked name:\n' + head)
    for d in (rst, alert):
        check(re.search(r'^  dpi +rule \S+:%s matched 1 time: %s, ' % (d['rule'], d['action']),
                        head, re.M),
              'headline: no line for YARA rule %s (%s):\n%s' % (d['rule'], d['action'], head))
    m = re.search(r'^  lb +service %s: %d flows over its backends: (.*)$' % (lb['service'], lb['flows']),
                  head, re.M)
    if check(m, 'headline: no line for service %s with %d flows:\n%s' % (lb['service'], lb['flows'], head)):
        per = dict((b, int(n)) for b, n in re.findall(r'(\S+) (\d+)(?:,|$)', m.group(1)))
        check(set(per) == set(lb['backends']) and sum(per.values()) == lb['flows'] and
              sum(1 for n in per.values() if n) > 1,
              'headline: flows per backend %s (want %d flows over more than one of %s)'
              % (per, lb['flows'], lb['backends']))

    for e in errors:
        print('demo: ' + e)
    print('demo: %d packets replayed, %d checks failed' % (len(verdicts), len(errors)))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
