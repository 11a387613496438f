#!/usr/bin/env python3
"""The `uses` graph between the modules of one crate's src/ (what `cargo
modules dependencies --no-owns` draws): an edge M -> N when M names an item
defined in N (through `use` trees, `super::`/`crate::`/`self::` paths, or a
child module's name), re-exports followed to the defining module; the owning
edge parent -> child (`mod x;`) is not a use. Prints the cycles."""
import os, re, sys
root = sys.argv[1]  # usage: module-cycles.py CRATE/src [--strict]
mods = {}
for dp, dn, fn in os.walk(root):
    for f in fn:
        if f.endswith('.rs'):
            p = os.path.join(dp, f)
            parts = os.path.relpath(p, root)[:-3].split('/')
            if parts[-1] in ('mod', 'lib', 'main'):
                parts = parts[:-1]
            mods['::'.join(parts)] = p
def strip(src):
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?mod\s+\w+\s*\{.*', '', src, flags=re.S)
    return src
text = {m: strip(open(p).read()) for m, p in mods.items()}
defs = {}
for m, s in text.items():
    for d in re.finditer(r'\b(?:struct|enum|fn|type|trait|const|static|union|macro_rules!)\s+([A-Za-z_][A-Za-z0-9_]*)', s):
        defs.setdefault(d.group(1), set()).add(m)
def expand(tree):
    tree = re.sub(r'\s+', '', tree)
    def rec(prefix, t):
        out = []
        i = t.find('{')
        if i < 0:
            for part in t.split(','):
                if part:
                    out.append(prefix + part.split('as')[0] if False else prefix + re.sub(r'as[A-Za-z_]\w*$', '', part) if '::' in part or part else prefix)
            return out
        head = t[:i]; body = t[i+1:t.rfind('}')]
        parts, depth, cur = [], 0, ''
        for ch in body:
            if ch == '{': depth += 1
            if ch == '}': depth -= 1
            if ch == ',' and depth == 0: parts.append(cur); cur = ''
            else: cur += ch
        if cur: parts.append(cur)
        for p in parts:
            out += rec(prefix + head, p) if '{' in p else [prefix + head + p]
        return out
    return rec('', tree)
def resolve(cur, segs):
    if not segs: return None
    if segs[0] == 'crate': base, segs = [], segs[1:]
    elif segs[0] == 'super':
        base = cur[:]
        while segs and segs[0] == 'super': base, segs = base[:-1], segs[1:]
    elif segs[0] == 'self': base, segs = cur[:], segs[1:]
    elif '::'.join(cur + [segs[0]]) in mods: base = cur[:]
    else: return None
    for i in range(len(segs), -1, -1):
        m = '::'.join(base + segs[:i])
        if m in mods:
            item = segs[i] if i < len(segs) else None
            if not item or item in ('*', 'self') or m in defs.get(item, set()):
                return m
            # Not defined in m: a re-export (`pub use x::Item`) followed to
            # its definition, an external crate's name (none), or m itself.
            u = re.search(r'\buse\s+([^;]*\b' + re.escape(item) + r'\b[^;]*);', text[m])
            if u:
                first = re.split(r'::|\{', re.sub(r'\s+', '', u.group(1)))[0]
                child = '::'.join(([m] if m else []) + [first])
                if first not in ('crate', 'self', 'super') and child not in mods:
                    return None  # another crate's item, re-exported
                inner = [d for d in defs.get(item, set()) if d.startswith(m + '::') or m == '']
                if len(inner) == 1:
                    return inner[0]
                return None if not inner else m
            return m
    return None
edges = {m: set() for m in mods}
for m, s in text.items():
    cur = m.split('::') if m else []
    for u in re.finditer(r'\buse\s+([^;]+);', s):
        for path in expand(u.group(1)):
            t = resolve(cur, path.split('::'))
            if t is not None and t != m: edges[m].add(t)
    body = re.sub(r'\buse\s+[^;]+;', '', s)
    for mt in re.finditer(r'(?<![A-Za-z0-9_:])((?:crate|super|self|[a-z_][a-z0-9_]*)(?:::[A-Za-z_][A-Za-z0-9_]*)+)', body):
        t = resolve(cur, mt.group(1).split('::'))
        if t is not None and t != m: edges[m].add(t)
# `--strict`: also count uses between a module and its ancestors (a child
# naming an item its parent's mod.rs defines while the parent uses the
# child); without it, the owner relation is left out and the cycles are
# the ones between sibling subtrees.
if '--strict' not in sys.argv:
    def related(a, b):
        return a == '' or b == '' or a.startswith(b + '::') or b.startswith(a + '::')
    edges = {m: {t for t in e if not related(m, t)} for m, e in edges.items()}
idx, low, st, on, out, n = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(100000)
def sc(v):
    idx[v] = low[v] = n[0]; n[0] += 1; st.append(v); on.add(v)
    for w in sorted(edges[v]):
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        c = []
        while True:
            w = st.pop(); on.discard(w); c.append(w)
            if w == v: break
        if len(c) > 1: out.append(sorted(c))
for v in sorted(edges):
    if v not in idx: sc(v)
print(f"{len(mods)} modules, {sum(len(e) for e in edges.values())} use edges")
for c in out:
    print("cycle:", ', '.join(x or '(crate root)' for x in c))
    for a in c:
        print('   ', a or '(root)', '->', ', '.join(sorted(x or '(root)' for x in edges[a] if x in c)))
if not out: print("no cycles")
