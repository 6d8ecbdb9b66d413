#!/usr/bin/env python3
"""What the --help texts promise, for completion_test.sh and help_test.sh.

usage: help_usage.py DPU_APPLIANCE DPUCTL
Prints one line per command key: "KEY<TAB>OPTION OPTION ..." where KEY is "dpuctl config
apply", "dpuctl stats", "dpu-appliance run", ... and the options are those its help text's
usage lines (or, for dpu-appliance, its "options:" section) name. The key "dpuctl" lists the
global options; "dpuctl-commands" the commands of `dpuctl --help`.
"""
import re
import subprocess
import sys

OPT = re.compile(r'(?<![\w-])(--[a-z][a-z0-9-]*)')


def run(*argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit('%s exited %d: %s' % (' '.join(argv), r.returncode, r.stderr))
    return r.stdout


def dpuctl(ctl):
    out = {}
    main = run(ctl, '--help')
    section = None
    commands = []
    for line in main.splitlines():
        if line.startswith('global options'):
            section = 'global'
        elif line.startswith('commands:'):
            section = 'commands'
        elif not line.strip() or not line.startswith(' '):
            section = None if not line.strip() and section == 'commands' else section
        elif section == 'global' and line.startswith('  --'):
            out.setdefault('dpuctl', set()).add(line.split()[0])
        elif section == 'commands' and line.startswith('  ') and not line.startswith('   '):
            commands.append(line.split()[0])
    out['dpuctl-commands'] = set(commands)
    for cmd in dict.fromkeys(commands):
        text = run(ctl, cmd, '--help').split('\nexamples:')[0]
        key = None
        for line in text.splitlines():
            m = re.match(r'^\s*(?:usage:\s*)?dpuctl %s\b(.*)$' % cmd, line)
            if m:
                rest = m.group(1).split()
                sub = rest[0] if rest and re.match(r'^[a-z]+$', rest[0]) else ''
                key = 'dpuctl %s%s' % (cmd, ' ' + sub if sub else '')
                out.setdefault(key, set()).update(OPT.findall(m.group(1)))
            elif key and re.match(r'^\s+[\[(]', line):
                out[key].update(OPT.findall(line))
    return out


def appliance(app):
    out = {}
    for cmd in ('run', 'replay', 'validate'):
        text = run(app, cmd, '--help')
        opts = set()
        usage = text.splitlines()[0]
        opts.update(OPT.findall(usage))
        in_opts = False
        for line in text.splitlines():
            if line.startswith('options:'):
                in_opts = True
                continue
            if line.startswith('examples:'):
                break
            if in_opts and re.match(r'^  --', line):
                opts.update(OPT.findall(re.split(r'\s{2,}', line.strip())[0]))
        out['dpu-appliance ' + cmd] = opts
    return out


def main():
    app, ctl = sys.argv[1:3]
    res = {}
    res.update(dpuctl(ctl))
    res.update(appliance(app))
    for k in sorted(res):
        print('%s\t%s' % (k, ' '.join(sorted(res[k]))))


if __name__ == '__main__':
    main()
