#!/usr/bin/env python3
"""Seed the fuzz corpora (fuzz/corpus/TARGET/) from the fixture repositories.

Usage: python3 fuzz/make_corpus.py [FIXTURES] [CORPUS]
  FIXTURES  defaults to target/fixtures (built by tests/fixtures/make_fixtures.py)
  CORPUS    defaults to fuzz/corpus

Standard library only; does not need hg. Revlogs are parsed here directly: every
revision's chunk is taken as stored (zlib, zstd or raw), and full texts are rebuilt
(zlib and raw chunks only, so from the zlib fixtures) and checked against their nodes.
Seeds are written in each target's input format (see the comment at the top of each
fuzz/fuzz_targets/*.rs) and named by their SHA-1, as libFuzzer names corpus files.
Seeds larger than MAX_SEED bytes are cut down or skipped, so that libFuzzer's default
-max_len (the largest seed) stays small enough for fast runs.
"""

import hashlib
import os
import struct
import sys
import zlib

MAX_SEED = 64 << 10
# Whole revlogs are read revision by revision: smaller inputs, many more runs.
MAX_SEED_OF = {'revlog': 16 << 10}
ENTRY = struct.Struct('>Qiiiiii20s12x')
NULL = b'\0' * 20


class Revlog:
    def __init__(self, index_path):
        with open(index_path, 'rb') as f:
            self.index = f.read()
        data_path = index_path[:-2] + '.d'
        self.data = b''
        self.has_data = os.path.exists(data_path)
        if self.has_data:
            with open(data_path, 'rb') as f:
                self.data = f.read()
        self.entries = []
        self.positions = []
        if len(self.index) < 4:
            self.inline = True
            self.generaldelta = False
            return
        flags = struct.unpack('>I', self.index[:4])[0]
        self.inline = bool(flags & (1 << 16))
        self.generaldelta = bool(flags & (1 << 17))
        pos = 0
        while pos + 64 <= len(self.index):
            e = ENTRY.unpack_from(self.index, pos)
            self.positions.append(pos)
            self.entries.append(e)
            pos += 64 + (e[1] if self.inline else 0)
        self.texts = {}

    def chunk(self, rev):
        off, clen = self.entries[rev][0] >> 16, self.entries[rev][1]
        if self.inline:
            start = self.positions[rev] + 64
            return self.index[start:start + clen]
        return self.data[off:off + clen]

    def chunk_end(self, rev):
        return (self.entries[rev][0] >> 16) + self.entries[rev][1]

    @staticmethod
    def decompress(chunk):
        if not chunk or chunk[:1] == b'\0':
            return chunk
        if chunk[:1] == b'u':
            return chunk[1:]
        if chunk[:1] == b'x':
            return zlib.decompress(chunk)
        return None  # zstd: not decodable with the standard library

    def chain(self, rev):
        """The revisions whose chunks rebuild rev, oldest first."""
        out = []
        cur = rev
        while True:
            out.append(cur)
            base = self.entries[cur][3]
            if base == cur or (base == -1 and self.generaldelta):
                break
            cur = base if self.generaldelta else cur - 1
        out.reverse()
        return out

    def node(self, rev):
        return NULL if rev == -1 else self.entries[rev][7]

    def text(self, rev):
        """The checked full text of rev, or None (zstd chunk, or a mismatch)."""
        chain = self.chain(rev)
        if self.entries[chain[0]][3] == chain[0]:
            text = self.decompress(self.chunk(chain[0]))
            deltas = chain[1:]
            if text is None:
                return None
        else:  # generaldelta, delta against the null revision
            text = b''
            deltas = chain
        for r in deltas:
            delta = self.decompress(self.chunk(r))
            if delta is None:
                return None
            text = mpatch(text, delta)
        e = self.entries[rev]
        p1, p2 = sorted([self.node(e[5]), self.node(e[6])])
        if hashlib.sha1(p1 + p2 + text).digest() != e[7]:
            return None
        return text

    def delta_seed(self, rev):
        """(raw_len, base text, [deltas]) for rev, or None."""
        chain = self.chain(rev)
        if len(chain) < 2:
            return None
        base = self.decompress(self.chunk(chain[0]))
        deltas = [self.decompress(self.chunk(r)) for r in chain[1:]]
        if base is None or any(d is None for d in deltas):
            return None
        return self.entries[rev][2], base, deltas


def mpatch(text, delta):
    out, pos, i = [], 0, 0
    while i < len(delta):
        start, end, length = struct.unpack_from('>lll', delta, i)
        i += 12
        out.append(text[pos:start])
        out.append(delta[i:i + length])
        i += length
        pos = end
    out.append(text[pos:])
    return b''.join(out)


def window(text, other, n):
    """The lines of text whose paths are within n paths of the first difference from other."""
    lines = dict(l.split(b'\0', 1) for l in text.splitlines(keepends=True))
    olines = dict(l.split(b'\0', 1) for l in other.splitlines(keepends=True))
    paths = sorted(set(lines) | set(olines))
    first = next((i for i, p in enumerate(paths) if lines.get(p) != olines.get(p)), 0)
    keep = set(paths[max(0, first - n):first + n])
    return b''.join(p + b'\0' + lines[p] for p in sorted(keep) if p in lines)


def path_lines(a, b):
    """Two manifest texts as manifest_paths input: a selector byte (bit 0: in a, bit 1: in
    b, bits 2-3: flag, bits 4-7: node) then the path, one line per path."""
    def entries(text):
        out = {}
        for line in text.splitlines():
            path, rest = line.split(b'\0', 1)
            flag = {b'': 0, b'x': 1, b'l': 2}.get(rest[40:], 3)
            out[path] = (rest[:40], flag)
        return out
    ea, eb = entries(a), entries(b)
    lines = []
    for path in sorted(set(ea) | set(eb)):
        sides = [(1, ea.get(path)), (2, eb.get(path))]
        if ea.get(path) == eb.get(path):
            sides = [(3, ea[path])]
        for bit, entry in sides:
            if entry is not None:
                node, flag = entry
                lines.append(bytes([bit | flag << 2 | (node[0] % 16) << 4]) + path)
    return b'\n'.join(lines)


def section(b):
    return struct.pack('>I', len(b)) + b


class Corpus:
    def __init__(self, root):
        self.root = root
        self.counts = {}

    def add(self, target, seed):
        if len(seed) > MAX_SEED_OF.get(target, MAX_SEED):
            return
        d = os.path.join(self.root, target)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, hashlib.sha1(seed).hexdigest())
        if not os.path.exists(path):
            with open(path, 'wb') as f:
                f.write(seed)
            self.counts[target] = self.counts.get(target, 0) + 1


def revlog_seed(rl, limit):
    """An .i/.d pair no larger than limit: the longest prefix of revisions that fits."""
    if rl.inline:
        if len(rl.index) <= limit - 4:
            return section(rl.index)
        end = max((p for p in rl.positions if p <= limit - 4), default=0)
        return section(rl.index[:end])
    n = 0
    while (n < len(rl.entries) and (n + 1) * 64 + rl.chunk_end(n) <= limit - 4):
        n += 1
    if n == 0:
        return None
    end = max(rl.chunk_end(r) for r in range(n))
    return section(rl.index[:n * 64]) + rl.data[:end]


def main():
    fixtures = sys.argv[1] if len(sys.argv) > 1 else 'target/fixtures'
    corpus = Corpus(sys.argv[2] if len(sys.argv) > 2 else 'fuzz/corpus')
    if not os.path.isdir(fixtures):
        sys.exit(f'{fixtures}: no fixtures; run python3 tests/fixtures/make_fixtures.py {fixtures}')
    indexes = []
    for dirpath, _, files in os.walk(fixtures):
        if '/.hg' not in dirpath + '/' or '/cache' in dirpath:
            continue
        for name in files:
            if name.endswith('.i') and not name.startswith('undo'):
                indexes.append(os.path.join(dirpath, name))
    indexes.sort()
    manifests = {}
    for path in indexes:
        rl = Revlog(path)
        corpus.add('revlog_index', rl.index if len(rl.index) <= MAX_SEED else
                   rl.index[:max((p for p in rl.positions if p <= MAX_SEED), default=0)])
        seed = revlog_seed(rl, MAX_SEED_OF['revlog'])
        if seed is not None:
            corpus.add('revlog', seed)
        for rev in range(len(rl.entries)):
            chunk = rl.chunk(rev)
            corpus.add('chunk_decompress', struct.pack('>i', rl.entries[rev][2]) + chunk)
            d = rl.delta_seed(rev)
            if d is not None:
                raw_len, base, deltas = d
                seed = struct.pack('>i', raw_len) + section(base)
                seed += b''.join(section(x) for x in deltas[:-1]) + deltas[-1]
                corpus.add('mpatch', seed)
        name = os.path.basename(path)
        if name == '00changelog.i':
            for rev in range(len(rl.entries)):
                text = rl.text(rev)
                if text is not None:
                    corpus.add('changelog', text)
        if name == '00manifest.i':
            texts = {}
            for rev in range(len(rl.entries)):
                text = rl.text(rev)
                if text is not None:
                    texts[rev] = text
            manifests[path] = texts
            for rev, text in texts.items():
                # Each manifest against its first parent, cut down to the lines around
                # the first change (small inputs run faster), and a few whole ones.
                p1 = rl.entries[rev][5]
                parent = texts.get(p1, b'')
                wa, wb = window(parent, text, 24), window(text, parent, 24)
                corpus.add('manifest', section(wa) + wb)
                corpus.add('manifest_paths', path_lines(wa, wb))
                if rev % 16 == 0:
                    corpus.add('manifest', section(parent) + text)
    for target, n in sorted(corpus.counts.items()):
        print(f'{target}: {n} new seeds')


if __name__ == '__main__':
    main()
