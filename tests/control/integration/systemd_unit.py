#!/usr/bin/env python3
"""The command lines systemd would run for a unit, as NUL-separated argv (for tests).

usage: systemd_unit.py UNIT ENVFILE KEY INDEX|count [NAME=VALUE ...]

KEY is ExecStartPre, ExecStart or ExecReload; INDEX picks one of its lines (0 = first) and
prints its argv NUL-separated; "count" prints how many lines there are. EnvironmentFile= is
replaced by ENVFILE;
NAME=VALUE pairs override its variables (MAINPID too). Expansion as systemd.service(5):
${NAME} is one word, $NAME splits on whitespace; "quoted" words stay one word.
"""
import shlex
import sys


def read_env(path):
    env = {}
    for line in open(path):
        line = line.strip()
        if not line or line[0] in '#;':
            continue
        k, _, v = line.partition('=')
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in '"\'':
            v = v[1:-1]
        env[k.strip()] = v
    return env


def expand(cmd, env):
    out = []
    for word in shlex.split(cmd):
        if word.startswith('${') and word.endswith('}') and word.count('$') == 1:
            out.append(env.get(word[2:-1], ''))
        elif word.startswith('$') and word[1:].replace('_', 'a').isalnum():
            out.extend(env.get(word[1:], '').split())
        else:
            for k, v in env.items():
                word = word.replace('${%s}' % k, v)
            out.append(word)
    return out


def main():
    unit, envfile, key, index = sys.argv[1:5]
    env = read_env(envfile)
    for kv in sys.argv[5:]:
        k, _, v = kv.partition('=')
        env[k] = v
    records = []
    for line in open(unit):
        line = line.strip()
        if line.startswith(key + '='):
            cmd = line[len(key) + 1:].lstrip('-@+!')
            records.append(expand(cmd, env))
    if not records:
        sys.exit('%s: no %s= line' % (unit, key))
    if index == 'count':
        print(len(records))
    else:
        sys.stdout.write('\0'.join(records[int(index)]))


if __name__ == '__main__':
    main()
