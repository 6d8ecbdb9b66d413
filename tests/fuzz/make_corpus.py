#!/usr/bin/python3
"""Builds fuzz corpora and dictionaries (standard library only; pcap and pcapng read with struct).

  make_corpus.py frames OUT_DIR [--pcaps PATH...] [--max N] [--per-pcap K] [--snaplen L]
      Ethernet frames, one file each, out of the captures under PATH (files or folders;
      default: ../shared/data/pcap and tests/pcap). Deterministic: captures in sorted order;
      frames of a "shape" not seen yet come first (ethertype chain, IP version, transport,
      fragment bits, TCP flags, size class), then the first frames of every capture, up to N
      files in all (default 4000), duplicates removed, each cut to L bytes (default 4096).
  make_corpus.py config OUT_DIR [--repo ROOT]
      Config documents: examples/config.json, tests/pcap/*/config.json and every file in
      tests/fuzz/seeds/config/ (duplicates removed).
  make_corpus.py dict OUT_FILE [--proto FILE]
      A libFuzzer dictionary for the config target: every field name of proto/appliance.proto
      as written in the .proto and in lowerCamelCase (quoted for JSON, bare for text
      format), every enum value name, and JSON / text-format punctuation and edge numbers.
  make_corpus.py seeds OUT_DIR [--max N]
      The small committed seed set (tests/fuzz/seeds/frames/frame-*): the most varied frames
      of the repository's own tests/pcap captures, at most N (default 48).
  make_corpus.py edge OUT_DIR
      Hand-made frames for corners real captures rarely show (IPv6 atomic fragments, cut
      extension header chains, tiny fragments, 64 KiB overruns, ...): the committed
      tests/fuzz/seeds/frames/edge-* files.
  make_corpus.py yara OUT_DIR [--rules PATH] [--max N] [--max-len L]
      Inputs of the yara target: rule files of ../shared/data/yara (or PATH) that fit in L
      bytes (default 4096), at most N (default 400), each followed by the target's "\\n\\0\\n"
      separator and bytes to scan that contain the file's first text string.
  make_corpus.py http OUT_DIR [--pcaps PATH...] [--max N] [--max-len L]
      Inputs of the http target (http_fuzz.cc): one per capture (default: the http-evader
      captures of ../shared/data/pcap), the settings byte then the IPv4 TCP payloads in
      capture order as in-order data records, client side 0; at most N (400) of <= L bytes.

Missing capture folders are skipped with a note on stderr (the corpus is then whatever the
other sources give; the committed seeds are always added by scripts/fuzz).
"""

import argparse
import hashlib
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LINKTYPE_ETHERNET = 1


def read_pcap(path):
    """Yields the Ethernet frames of a pcap or pcapng file; stops quietly at damage."""
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError as e:
        print(f'make_corpus: {path}: {e}', file=sys.stderr)
        return
    if len(data) < 24:
        return
    magic = data[:4]
    if magic in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1'):
        endian = '<'
    elif magic in (b'\xa1\xb2\xc3\xd4', b'\xa1\xb2\x3c\x4d'):
        endian = '>'
    elif magic == b'\x0a\x0d\x0d\x0a':
        yield from read_pcapng(data)
        return
    else:
        return
    linktype = struct.unpack(endian + 'I', data[20:24])[0] & 0x0FFFFFFF
    if linktype != LINKTYPE_ETHERNET:
        return
    off = 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + 'IIII', data[off:off + 16])
        off += 16
        if incl > len(data) - off or incl > 0x40000:
            return
        yield data[off:off + incl]
        off += incl


def read_pcapng(data):
    off = 0
    endian = '<'
    links = []
    while off + 12 <= len(data):
        btype = struct.unpack(endian + 'I', data[off:off + 4])[0]
        if btype == 0x0A0D0D0A:  # section header: byte order magic decides the endianness
            bom = data[off + 8:off + 12]
            endian = '<' if bom == b'\x4d\x3c\x2b\x1a' else '>'
            links = []
        blen = struct.unpack(endian + 'I', data[off + 4:off + 8])[0]
        if blen < 12 or off + blen > len(data):
            return
        body = data[off + 8:off + blen - 4]
        if btype == 1 and len(body) >= 2:  # interface description
            links.append(struct.unpack(endian + 'H', body[:2])[0])
        elif btype == 6 and len(body) >= 20:  # enhanced packet
            iface, _, _, cap, _ = struct.unpack(endian + 'IIIII', body[:20])
            if iface < len(links) and links[iface] == LINKTYPE_ETHERNET and cap <= len(body) - 20:
                yield body[20:20 + cap]
        elif btype == 3 and len(body) >= 4:  # simple packet (interface 0)
            if links and links[0] == LINKTYPE_ETHERNET:
                yield body[4:]
        off += blen


def shape(frame):
    """A coarse description of a frame's headers, to prefer varied frames."""
    if len(frame) < 14:
        return ('short', len(frame))
    off = 12
    chain = []
    et = int.from_bytes(frame[off:off + 2], 'big')
    while et in (0x8100, 0x88A8, 0x9100) and len(chain) < 4:
        chain.append(et)
        off += 4
        if off + 2 > len(frame):
            return ('cut', tuple(chain))
        et = int.from_bytes(frame[off:off + 2], 'big')
    chain.append(et)
    l3 = off + 2
    proto = frag = flags = None
    if et == 0x0800 and len(frame) >= l3 + 20:
        ihl = (frame[l3] & 15) * 4
        proto = frame[l3 + 9]
        fo = int.from_bytes(frame[l3 + 6:l3 + 8], 'big')
        frag = (bool(fo & 0x2000), (fo & 0x1FFF) != 0, ihl > 20)
        l4 = l3 + ihl
    elif et == 0x86DD and len(frame) >= l3 + 40:
        proto = frame[l3 + 6]
        l4 = l3 + 40
    else:
        l4 = None
    if proto == 6 and l4 is not None and len(frame) >= l4 + 14:
        flags = frame[l4 + 13] & 0x17
    elif proto in (1, 58) and l4 is not None and len(frame) > l4:
        flags = frame[l4]
    return (tuple(chain), proto, frag, flags, min(len(frame) // 512, 4))


def default_pcap_paths():
    return [os.path.normpath(os.path.join(REPO, '..', 'shared', 'data', 'pcap')),
            os.path.join(REPO, 'tests', 'pcap')]


def list_captures(paths):
    files = []
    for p in paths:
        if os.path.isfile(p):
            files.append(p)
        elif os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs.sort()
                for n in sorted(names):
                    if n.endswith(('.pcap', '.pcapng', '.cap', '.dmp')):
                        files.append(os.path.join(root, n))
        else:
            print(f'make_corpus: {p}: not found, skipped', file=sys.stderr)
    return files


def pick_frames(captures, limit, per_pcap, snaplen, per_shape):
    chosen = []
    seen = set()
    shapes = {}
    firsts = []
    for path in captures:
        taken = 0
        for frame in read_pcap(path):
            frame = bytes(frame[:snaplen])
            digest = hashlib.sha1(frame).digest()
            if digest in seen:
                continue
            s = shape(frame)
            if shapes.get(s, 0) < per_shape and len(chosen) < limit:
                shapes[s] = shapes.get(s, 0) + 1
                seen.add(digest)
                chosen.append(frame)
            elif taken < per_pcap:
                firsts.append((digest, frame))
            taken += 1
    for digest, frame in firsts:
        if len(chosen) >= limit:
            break
        if digest not in seen:
            seen.add(digest)
            chosen.append(frame)
    return chosen[:limit], len(shapes)


def write_files(out_dir, blobs, prefix):
    os.makedirs(out_dir, exist_ok=True)
    for blob in blobs:
        name = prefix + hashlib.sha1(blob).hexdigest()[:16]
        with open(os.path.join(out_dir, name), 'wb') as f:
            f.write(blob)


def cmd_frames(a):
    captures = list_captures(a.pcaps or default_pcap_paths())
    frames, nshapes = pick_frames(captures, a.max, a.per_pcap, a.snaplen, per_shape=3)
    write_files(a.out, frames, 'frame-')
    print(f'make_corpus: {len(frames)} frames ({nshapes} shapes) from {len(captures)} captures '
          f'-> {a.out}')


def cmd_seeds(a):
    captures = list_captures([os.path.join(REPO, 'tests', 'pcap')])
    frames, nshapes = pick_frames(captures, a.max, 0, 2048, per_shape=1)
    write_files(a.out, frames, 'frame-')
    print(f'make_corpus: {len(frames)} seed frames ({nshapes} shapes) -> {a.out}')


def _eth(ethertype, tags=()):
    hdr = b'\x02\x00\x00\x00\x00\x02' + b'\x02\x00\x00\x00\x00\x01'
    for tpid, vid in tags:
        hdr += struct.pack('>HH', tpid, vid)
    return hdr + struct.pack('>H', ethertype)


def _ipv4(proto, payload, options=b'', flags_off=0, ident=0x1234, total=None):
    ihl = (20 + len(options)) // 4
    length = total if total is not None else 20 + len(options) + len(payload)
    return struct.pack('>BBHHHBBH4s4s', 0x40 | ihl, 0, length, ident, flags_off, 64, proto, 0,
                       bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])) + options + payload


def _ipv6(nh, payload):
    src = bytes([0x20, 0x01, 0x0d, 0xb8] + [0] * 11 + [1])
    dst = bytes([0x20, 0x01, 0x0d, 0xb8] + [0] * 11 + [2])
    return struct.pack('>IHBB', 0x60000000, len(payload), nh, 64) + src + dst + payload


def _tcp(sport=1234, dport=80, flags=0x02, data=b''):
    return struct.pack('>HHIIBBHHH', sport, dport, 1, 0, 5 << 4, flags, 8192, 0, 0) + data


def _udp(sport=5353, dport=53, data=b'', length=None):
    return struct.pack('>HHHH', sport, dport, length if length is not None else 8 + len(data), 0) + data


def _ext(nh, units=0):
    """An IPv6 extension header (8-byte units) whose next header is nh."""
    return bytes([nh, units]) + bytes(6 + 8 * units)


def edge_frames():
    """Hand-made frames for corners the captures rarely show (see cmd_edge)."""
    e4, e6 = _eth(0x0800), _eth(0x86DD)
    frag6 = lambda nh, off, more, ident=7: struct.pack('>BBHI', nh, 0, (off & 0xFFF8) | more, ident)
    return {
        'v6-atomic-fragment-tcp': e6 + _ipv6(44, frag6(6, 0, 0) + _tcp(data=b'x' * 4)),
        'v6-first-fragment-destopts-udp': e6 + _ipv6(44, frag6(60, 0, 1) + _ext(17) + _udp(data=b'q' * 8)),
        'v6-later-fragment': e6 + _ipv6(44, frag6(6, 1448, 1) + b'z' * 24),
        'v6-first-fragment-chain-cut': e6 + _ipv6(44, frag6(60, 0, 1) + bytes([17, 3]) + bytes(6)),
        'v6-ah-icmpv6-echo': e6 + _ipv6(51, bytes([58, 1]) + bytes(10) + bytes([128, 0, 0, 0, 0, 9, 0, 1])),
        # hop-by-hop, 6 destination options, routing: the most the parser takes
        'v6-eight-ext-headers': e6 + _ipv6(0, _ext(60) * 6 + _ext(43) + _ext(6) + _tcp(flags=0x10)),
        'v6-icmpv4-inside': e6 + _ipv6(1, bytes([8, 0, 0, 0, 0, 1, 0, 1])),
        'v4-tiny-first-fragment-tcp': e4 + _ipv4(6, _tcp()[:8], flags_off=0x2000),
        # first fragment: the TCP options (data offset 15) continue in the next fragment
        'v4-first-fragment-tcp-options-cut': e4 + _ipv4(6, _tcp()[:12] + bytes([0xF0, 0x02])
                                                      + bytes(10), flags_off=0x2000),
        'v4-later-fragment': e4 + _ipv4(17, b'y' * 32, flags_off=185),
        'v4-fragment-past-64k': e4 + _ipv4(17, b'y' * 32, flags_off=0x1FFF),
        'v4-options-udp-short-length': e4 + _ipv4(17, _udp(data=b'a' * 16, length=12) + b'pad!',
                                                 options=b'\x94\x04\x00\x00' + b'\x01' * 36),
        'qinq-9100-icmp-echo': _eth(0x0800, ((0x9100, 100), (0x8100, 200)))
                               + _ipv4(1, bytes([8, 0, 0, 0, 0x12, 0x34, 0, 1]) + b'ping'),
        'three-vlan-tags': _eth(0x0800, ((0x88A8, 1), (0x8100, 2), (0x8100, 3))) + _ipv4(17, _udp()),
        'arp': _eth(0x0806) + bytes.fromhex('0001080006040001') + bytes(20),
        'v4-tcp-data-offset-15': e4 + _ipv4(6, _tcp()[:12] + bytes([0xF0, 0x18]) + bytes(46)),
        # PPPoE sessions: IPv4 / IPv6 inside (2-byte and compressed PPP protocol), LCP (non-IP)
        'pppoe-v4-tcp': _pppoe(_ipv4(6, _tcp(data=b'GET /')), 0x0021) + bytes(6),
        'pppoe-v6-udp-compressed': _pppoe(_ipv6(17, _udp(data=b'dns?')), 0x57, 1),
        'pppoe-lcp-echo': _pppoe(bytes([9, 1, 0, 8, 0, 0, 0, 0]), 0xC021),
    }


def _pppoe(ppp_payload, proto, proto_len=2, session=0x11):
    """A PPPoE session frame (ethertype 0x8864) carrying one PPP frame."""
    ppp = (struct.pack('>H', proto) if proto_len == 2 else bytes([proto])) + ppp_payload
    return _eth(0x8864) + struct.pack('>BBHH', 0x11, 0, session, len(ppp)) + ppp


def cmd_edge(a):
    os.makedirs(a.out, exist_ok=True)
    frames = edge_frames()
    for name, frame in frames.items():
        with open(os.path.join(a.out, 'edge-' + name), 'wb') as f:
            f.write(frame)
    print(f'make_corpus: {len(frames)} hand-made frames -> {a.out}')


def cmd_config(a):
    repo = a.repo
    sources = [os.path.join(repo, 'examples', 'config.json')]
    pcap_dir = os.path.join(repo, 'tests', 'pcap')
    if os.path.isdir(pcap_dir):
        for case in sorted(os.listdir(pcap_dir)):
            sources.append(os.path.join(pcap_dir, case, 'config.json'))
    seed_dir = os.path.join(repo, 'tests', 'fuzz', 'seeds', 'config')
    if os.path.isdir(seed_dir):
        sources += [os.path.join(seed_dir, n) for n in sorted(os.listdir(seed_dir))]
    blobs, seen = [], set()
    for s in sources:
        if not os.path.isfile(s):
            continue
        with open(s, 'rb') as f:
            blob = f.read()
        if blob not in seen:
            seen.add(blob)
            blobs.append(blob)
    write_files(a.out, blobs, 'config-')
    print(f'make_corpus: {len(blobs)} config documents -> {a.out}')


def lower_camel(name):
    parts = name.split('_')
    return parts[0] + ''.join(p[:1].upper() + p[1:] for p in parts[1:])


def cmd_dict(a):
    with open(a.proto, encoding='utf-8') as f:
        text = re.sub(r'//[^\n]*', '', f.read())
    fields, enums, messages = set(), set(), set()
    for m in re.finditer(r'^\s*(?:repeated\s+|optional\s+)?(?:map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*\d+',
                         text, re.M):
        fields.add(m.group(1))
    for m in re.finditer(r'^\s*([A-Z][A-Z0-9_]*)\s*=\s*-?\d+\s*;', text, re.M):
        enums.add(m.group(1))
    for m in re.finditer(r'\b(?:message|enum)\s+(\w+)', text):
        messages.add(m.group(1))
    entries = []
    for name in sorted(fields):
        entries.append(f'"\\"{name}\\""')
        camel = lower_camel(name)
        if camel != name:
            entries.append(f'"\\"{camel}\\""')
        entries.append(f'"{name}"')
        entries.append(f'"{name}:"')
        entries.append(f'"{name} {{"')
    for name in sorted(enums):
        entries.append(f'"\\"{name}\\""')
        entries.append(f'"{name}"')
    for name in sorted(messages):
        entries.append(f'"{name}"')
    for tok in ['{', '}', '[', ']', ':', ',', '<', '>', '#', 'true', 'false', 'null', '\\"\\"',
                '0', '-1', '4294967295', '4294967296', '18446744073709551615', '1e309', '1.5',
                '\\"1\\"', '0x10', '\\\\u0000', '[]', '{}']:
        entries.append(f'"{tok}"')
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, 'w', encoding='utf-8') as f:
        f.write('# Generated by tests/fuzz/make_corpus.py dict from ' + os.path.relpath(a.proto, REPO)
                + '\n')
        for e in entries:
            f.write(e + '\n')
    print(f'make_corpus: {len(entries)} dictionary entries ({len(fields)} fields, '
          f'{len(enums)} enum values) -> {a.out}')


def cmd_yara(a):
    """Rule files of ../shared/data/yara small enough for the yara target (<= max_len), each
    followed by the target's separator and a few bytes to scan (the rule's first text string
    when it has one, so that some inputs match)."""
    root = a.rules or os.path.normpath(os.path.join(REPO, '..', 'shared', 'data', 'yara'))
    blobs = []
    for r, dirs, names in os.walk(root):
        dirs.sort()
        for n in sorted(names):
            if not n.endswith(('.yar', '.yara')):
                continue
            with open(os.path.join(r, n), 'rb') as f:
                text = f.read()
            m = re.search(rb'\$\w*\s*=\s*"([^"\\]{4,64})"', text)
            tail = b'\n\0\nxx' + (m.group(1) if m else b'') + b'yy'
            if len(text) + len(tail) <= a.max_len:
                blobs.append(text + tail)
            if len(blobs) >= a.max:
                break
    write_files(a.out, blobs, 'yar-')
    print(f'make_corpus: {len(blobs)} YARA rule files from {root} -> {a.out}')


def http_input(frames, opt=0x12):
    """One input of the http target (tests/fuzz/http_fuzz.cc) from the IPv4 TCP frames of
    one HTTP connection: the settings byte (IDS personality, 3 encoding layers), then every
    payload in capture order as in-order data records (op 0, <= 256 bytes each), direction 0
    for the side that sent the SYN (else the side talking to port 80)."""
    out = bytearray([opt])
    client = None
    for fr in frames:
        if len(fr) < 34 or fr[12:14] != b'\x08\x00' or fr[23] != 6:
            continue
        ihl = (fr[14] & 15) * 4
        total = struct.unpack('>H', fr[16:18])[0]
        l4 = 14 + ihl
        if len(fr) < l4 + 20:
            continue
        src = fr[26:30] + fr[l4:l4 + 2]
        dport = struct.unpack('>H', fr[l4 + 2:l4 + 4])[0]
        flags = fr[l4 + 13]
        if client is None and (flags & 0x12) == 0x02:
            client = src
        if client is None and dport == 80:
            client = src
        data = fr[l4 + (fr[l4 + 12] >> 4) * 4:14 + total]
        d = 0 if src == client else 1
        for k in range(0, len(data), 256):
            part = data[k:k + 256]
            out += bytes([d, len(part) - 1]) + part
    return bytes(out)


def cmd_http(a):
    """Inputs of the http target: one per capture (its TCP payloads as one connection),
    from the http-evader captures of ../shared/data/pcap by default."""
    root = os.path.normpath(os.path.join(REPO, '..', 'shared', 'data', 'pcap', 'OISF+suricata-verify',
                                         'tests', 'http-evader'))
    paths = a.pcaps or sorted(os.path.join(root, t, 'input.pcap') for t in
                              (os.listdir(root) if os.path.isdir(root) else []))
    blobs = []
    for p in paths:
        frames = list(read_pcap(p))
        blob = http_input(frames)
        if 1 < len(blob) <= a.max_len:
            blobs.append(blob)
        if len(blobs) >= a.max:
            break
    write_files(a.out, blobs, 'http-')
    print(f'make_corpus: {len(blobs)} HTTP connections from {len(paths)} captures -> {a.out}')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest='cmd', required=True)
    f = sub.add_parser('frames')
    f.add_argument('out')
    f.add_argument('--pcaps', nargs='*')
    f.add_argument('--max', type=int, default=4000)
    f.add_argument('--per-pcap', type=int, default=2)
    f.add_argument('--snaplen', type=int, default=4096)
    s = sub.add_parser('seeds')
    s.add_argument('out')
    s.add_argument('--max', type=int, default=48)
    c = sub.add_parser('config')
    c.add_argument('out')
    c.add_argument('--repo', default=REPO)
    e = sub.add_parser('edge')
    e.add_argument('out')
    d = sub.add_parser('dict')
    d.add_argument('out')
    d.add_argument('--proto', default=os.path.join(REPO, 'proto', 'appliance.proto'))
    y = sub.add_parser('yara')
    y.add_argument('out')
    y.add_argument('--rules')
    y.add_argument('--max', type=int, default=400)
    y.add_argument('--max-len', type=int, default=4096)
    h = sub.add_parser('http')
    h.add_argument('out')
    h.add_argument('--pcaps', nargs='*')
    h.add_argument('--max', type=int, default=400)
    h.add_argument('--max-len', type=int, default=4096)
    a = ap.parse_args()
    {'http': cmd_http, 'frames': cmd_frames, 'seeds': cmd_seeds, 'edge': cmd_edge, 'config': cmd_config,
     'dict': cmd_dict, 'yara': cmd_yara}[a.cmd](a)


if __name__ == '__main__':
    main()
