#!/usr/bin/env python3
"""docs/dns-guide.md's offline commands run as written and print what the guide shows.

usage: dns_guide_test.py REPO_ROOT DPU_APPLIANCE

In a temporary directory (with `examples` linked to the repository's), the guide's
`$ dpu-appliance replay ...` command (`dpu-appliance` being the built one) must print every
line the guide quotes after it (in order; `...` stands for lines left out), the `$ tshark
...` command on its output must print exactly the guide's lines (skipped without tshark),
and the `printf` / `echo` / `dpu-appliance validate` example must print the guide's lines
and exit 4 (its /tmp paths moved to the temporary directory). Regenerate the quoted output
with the same commands when this fails (docs/dns-guide.md says how).
"""
import os
import shutil
import subprocess
import sys
import tempfile


def commands(text):
    """(command, expected output lines) for each `$ ` line of the guide's indented blocks."""
    lines = text.split('\n')
    out, i = [], 0
    while i < len(lines):
        s = lines[i].strip()
        if not s.startswith('$ '):
            i += 1
            continue
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        cmd = s[2:]
        while cmd.endswith('\\') and i + 1 < len(lines):
            i += 1
            cmd = cmd[:-1] + ' ' + lines[i].strip()
        i += 1
        expect = []
        # The block goes on over blank lines, up to the next command or unindented text.
        while (i < len(lines) and (lines[i].startswith(indent) or not lines[i].strip()) and
               not lines[i].strip().startswith('$ ')):
            expect.append(lines[i][len(indent):])
            i += 1
        while expect and not expect[-1].strip():
            expect.pop()
        out.append((cmd, [e for e in expect if e.strip()]))
    return out


def run(cmd, cwd, app):
    cmd = cmd.replace('dpu-appliance ', app + ' ', 1) if cmd.startswith('dpu-appliance ') else cmd
    r = subprocess.run(['bash', '-c', cmd], cwd=cwd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr, r.stdout


def main():
    root, app = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    guide = open(os.path.join(root, 'docs', 'dns-guide.md')).read()
    cmds = commands(guide)
    errors = []
    work = tempfile.mkdtemp(prefix='dpu_dns_guide.')
    try:
        os.symlink(os.path.join(root, 'examples'), os.path.join(work, 'examples'))
        replay = [c for c in cmds if c[0].startswith('dpu-appliance replay --config examples/dns')]
        tshark = [c for c in cmds if c[0].startswith('tshark ')]
        bad = [c for c in cmds if '/tmp/bad-' in c[0]]
        if len(replay) != 1 or len(tshark) != 1 or len(bad) != 3:
            errors.append('the guide no longer has the replay / tshark / validate examples '
                          '(%d, %d, %d)' % (len(replay), len(tshark), len(bad)))
        for cmd, expect in replay:
            rc, out, _ = run(cmd, work, app)
            got = [l.rstrip() for l in out.split('\n')]
            pos = 0
            for e in expect:
                if e.strip() == '...':
                    continue
                try:
                    pos = got.index(e.rstrip(), pos) + 1
                except ValueError:
                    errors.append('replay: the guide quotes %r, which the run does not print '
                                  '(in that order)' % e)
            if rc != 0:
                errors.append('replay exited %d:\n%s' % (rc, out))
        for cmd, expect in tshark:
            if shutil.which('tshark') is None:
                print('tshark not installed: its example is not checked')
                continue
            rc, _, stdout = run(cmd, work, app)
            got = [l.rstrip() for l in stdout.rstrip('\n').split('\n')]
            expect = [e.rstrip() for e in expect]
            if rc != 0 or got != expect:
                errors.append('tshark: the guide shows\n  %s\nthe run prints\n  %s' %
                              ('\n  '.join(expect), '\n  '.join(got)))
        for k, (cmd, expect) in enumerate(bad):
            rc, out, _ = run(cmd.replace('/tmp/', work + '/'), work, app)
            want = [e.replace('/tmp/', work + '/') for e in expect]
            got = out.rstrip('\n').split('\n') if out.strip() else []
            if got != want:
                errors.append('%s\n  guide:\n  %s\n  run:\n  %s' % (cmd, '\n  '.join(want),
                                                                  '\n  '.join(got)))
            if k == len(bad) - 1 and rc != 4:
                errors.append('%s exited %d, the guide says 4' % (cmd, rc))
    finally:
        shutil.rmtree(work)
    for e in errors:
        print('FAIL:', e)
    if errors:
        return 1
    print('ok: docs/dns-guide.md: %d commands checked' % (len(replay) + len(tshark) + len(bad)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
