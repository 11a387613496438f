"""The examples' inputs, read from batchlab traces (``engine record``,
``search random-dag``), so a PyTorch recording sees the samples batchlab's
built-in workloads see, from the SST fixture files in ``data/``
(:func:`sst_split`), for training on a whole split, and synthetic
molecule-like graphs, drawn from a seeded generator (no data set is read
or downloaded)."""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass, field


@dataclass
class Tree:
    """A parse tree node: a leaf has a word id, an internal node children."""

    label: int
    word: int | None = None
    children: list[Tree] = field(default_factory=list)

    def size(self) -> int:
        return 1 + sum(c.size() for c in self.children)


def sst_trees(trace_path: str) -> list[Tree]:
    """The SST trees of a ``engine record --workload tree-lstm`` trace, one
    per instance, with their recorded word ids and labels."""
    with open(trace_path) as f:
        t = json.load(f)
    types = [ty["name"].split("[")[0] for ty in t["types"]]
    nodes = t["nodes"]
    made: dict[int, Tree] = {}
    label: dict[int, int] = {}
    for n in nodes:
        role = types[n["type"]]
        if role == "sentiment.loss":
            label[n["args"][0]] = n.get("data", {}).get("label", 0)
    roots: dict[int, Tree] = {}
    for i, n in enumerate(nodes):
        role = types[n["type"]]
        if role == "tree_lstm.leaf":
            made[i] = Tree(label.get(i, 0), word=nodes[n["args"][0]].get("data", {}).get("id", 0))
        elif role == "tree_lstm.internal":
            made[i] = Tree(label.get(i, 0), children=[made[a] for a in n["args"]])
        else:
            continue
        roots[n["instance"]] = made[i]  # post-order: the last tree node of an instance is its root
    return [roots[k] for k in sorted(roots)]


SST_MAGIC = "# batchlab fixture v2 trees"
SST_CLASSES = 5  # SST's sentiment labels: 0 very negative ... 4 very positive

_DIGITS = re.compile(r"[0-9]+")  # not \d: that also matches non-ASCII digits


def sst_split(path: str | os.PathLike[str]) -> list[Tree]:
    """The trees of an SST fixture file (``data/sst-{train,dev,test}.trees``,
    format in ``data/README.md``): every node's label, every leaf's word id.

    As strict as batchlab's own reader (``engine/core/src/data/fixtures``):
    the first line is the v2 trees header (a v1 file has no labels), ``#``
    lines are comments, every other line is one canonical tree (single
    spaces, no leading zeros, ``\n`` endings); anything else is a
    ``ValueError`` naming ``file:line``, so a damaged file is never half
    read. Labels must be SST's 0-4."""
    with open(path, "rb") as f:
        raw = f.read()
    lines = raw.split(b"\n")
    if raw.endswith(b"\n"):
        lines.pop()  # a final newline ends the last line; it does not start one
    if not raw:
        raise ValueError(f"{path}:1: empty file: missing the fixture header '{SST_MAGIC}'")
    trees = []
    for no, b in enumerate(lines, start=1):
        try:
            line = b.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}:{no}: not UTF-8 at byte {e.start + 1} of the line") from None
        try:
            if no == 1:
                _check_magic(line)
            elif not line.startswith("#"):
                trees.append(_sst_tree(line))
        except _LineError as e:
            raise ValueError(f"{path}:{no}: {e}") from None
    return trees


class _LineError(Exception):
    """A malformed line; :func:`sst_split` adds the file and line number."""


def _check_magic(line: str) -> None:
    if line == SST_MAGIC:
        return
    if line == "# batchlab fixture v1 trees":
        raise _LineError("a v1 (structure-only) tree fixture: SST training needs v2, with labels and word ids")
    raise _LineError(f"expected the fixture header '{SST_MAGIC}', found {line!r}")


def _sst_tree(line: str) -> Tree:
    """One v2 tree line, ``(<label> w<id>)`` or ``(<label> <left> <right>)``;
    iterative, so that a deeply nested line cannot exhaust Python's stack."""
    if not line:
        raise _LineError("empty line (one sample per line expected)")
    if "\r" in line:
        col = line.index("\r") + 1
        raise _LineError(f"carriage return at column {col} (fixtures use \\n line endings)")
    pos = 0

    def expect(ch: str, why: str = "") -> None:
        nonlocal pos
        if pos >= len(line):
            raise _LineError(f"expected {ch!r} at column {pos + 1} (end of line){why}")
        if line[pos] != ch:
            raise _LineError(f"expected {ch!r} at column {pos + 1}, found {line[pos]!r}{why}")
        pos += 1

    def number(what: str) -> int:
        nonlocal pos
        m = _DIGITS.match(line, pos)
        if m is None:
            found = f"found {line[pos]!r}" if pos < len(line) else "end of line"
            raise _LineError(f"expected {what} (a number) at column {pos + 1}, {found}")
        if len(m.group()) > 1 and m.group().startswith("0"):
            raise _LineError(f"leading zero in {what} at column {pos + 1}")
        pos = m.end()
        return int(m.group())

    opened: list[tuple[int, Tree]] = []  # internal nodes waiting for children, with their columns
    while True:
        col = pos + 1
        expect("(")
        label = number("label")
        if label >= SST_CLASSES:
            raise _LineError(f"label {label} at column {col + 1} is not an SST sentiment (0-{SST_CLASSES - 1})")
        expect(" ")
        if pos < len(line) and line[pos] == "w":
            pos += 1
            done = Tree(label, word=number("word id"))
            expect(")")
        else:
            opened.append((col, Tree(label)))
            continue
        # Hand finished subtrees up until one is a left child or the root.
        while True:
            if not opened:
                if pos < len(line):
                    raise _LineError(f"trailing characters after the tree at column {pos + 1}")
                return done
            at, node = opened[-1]
            node.children.append(done)
            if len(node.children) == 1:
                expect(" ", f": the node opened at column {at} needs two children")
                break
            expect(")", f": the node opened at column {at} has two children")
            opened.pop()
            done = node


def flatten_trees(trees: list[Tree], seed: int = 1) -> list[Tree]:
    """Dependency-style trees from binary ones: each internal child is merged
    into its parent with probability 1/2 (its children become the parent's),
    so nodes have any number of children (seeded, deterministic)."""
    rng = random.Random(seed)

    def go(t: Tree) -> Tree:
        if t.word is not None:
            return Tree(t.label, word=t.word)
        kids: list[Tree] = []
        for c in t.children:
            g = go(c)
            if g.word is None and rng.random() < 0.5:
                kids.extend(g.children)
            else:
                kids.append(g)
        return Tree(t.label, children=kids)

    return [go(t) for t in trees]


@dataclass
class Dag:
    """A DAG: per node its kind and its predecessors (ids of earlier nodes)."""

    kinds: list[int]
    preds: list[list[int]]
    label: int


def random_dags(trace_path: str, per_dag: int, classes: int = 5) -> list[Dag]:
    """Cuts a ``search random-dag`` trace (one big DAG with typed nodes) into
    samples of ``per_dag`` consecutive nodes, edges into earlier samples
    dropped; each sample's label is its node count modulo ``classes`` mixed
    with its kinds (deterministic)."""
    with open(trace_path) as f:
        t = json.load(f)
    nodes = t["nodes"]
    out = []
    for start in range(0, len(nodes) - per_dag + 1, per_dag):
        kinds, preds = [], []
        for n in nodes[start : start + per_dag]:
            kinds.append(n["type"])
            preds.append(sorted({a - start for a in n["args"] if a >= start}))
        out.append(Dag(kinds, preds, (sum(kinds) + len(kinds)) % classes))
    return out


@dataclass
class FolderNode:
    """A node of a model folder's trace: its role, arguments, sample, data."""

    role: str
    args: list[int]
    instance: int | None
    id: int | None
    label: int | None


def folder_nodes(folder: str) -> list[FolderNode]:
    """The nodes of a model folder's trace with their roles (what the
    examples' ``setup`` functions rebuild their samples from)."""
    with open(f"{folder}/model.json") as f:
        manifest = json.load(f)
    with open(f"{folder}/trace.json") as f:
        trace = json.load(f)
    role_of = {r["type"]: r["role"] for r in manifest["roles"]}
    types = [role_of[t["name"]] for t in trace["types"]]
    out = []
    for n in trace["nodes"]:
        d = n.get("data", {})
        out.append(FolderNode(types[n["type"]], n["args"], n.get("instance"), d.get("id"), d.get("label")))
    return out


def weight_shapes(folder: str) -> dict[str, list[int]]:
    """The shapes of a model folder's weights, by name (from the header)."""
    import struct

    with open(f"{folder}/weights.safetensors", "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {k: v["shape"] for k, v in header.items() if k != "__metadata__"}


@dataclass
class Sentence:
    """A tagged sentence: word ids and one gold tag per word."""

    words: list[int]
    tags: list[int]


def wikiner_sentences(trace_path: str) -> list[Sentence]:
    """The WikiNER sentences of a ``engine record --workload bilstm-tagger``
    trace, one per instance: word ids in order (its ``embed.word`` nodes)
    and gold tags (its ``tagger.loss`` nodes, in word order)."""
    with open(trace_path) as f:
        t = json.load(f)
    types = [ty["name"].split("[")[0] for ty in t["types"]]
    sents: dict[int, Sentence] = {}
    for n in t["nodes"]:
        role = types[n["type"]]
        d = n.get("data", {})
        if role == "embed.word":
            sents.setdefault(n["instance"], Sentence([], [])).words.append(d.get("id", 0))
        elif role == "tagger.loss":
            sents[n["instance"]].tags.append(d.get("label", 0))
    return [sents[k] for k in sorted(sents)]


# Synthetic molecule-like graphs for the gated graph network (``ggnn.py``).
# No data set is read or downloaded: the graphs are drawn from a seeded
# generator whose statistics resemble small organic molecules (mostly
# carbon, a few heteroatoms, mostly single bonds, some rings).

ATOMS = ["C", "N", "O", "S", "F", "Cl"]
# Carbon dominates as in organic molecules; the skew makes some atom types rare.
ATOM_WEIGHTS = [0.70, 0.12, 0.12, 0.02, 0.02, 0.02]
# The most bonds an atom of each type takes (its usual valence, at most 4).
ATOM_DEGREE = [4, 3, 2, 2, 1, 1]
BONDS = ["single", "double", "triple", "aromatic"]
BOND_WEIGHTS = [0.75, 0.15, 0.03, 0.07]
# Label classes: whether the graph has a ring, and whether at least 30 %
# of its atoms are heteroatoms (both signs of sums over nodes: a ring means
# more bonds than atoms less one; so a sum readout can learn them).
MOLECULE_CLASSES = 4


@dataclass
class Molecule:
    """A synthetic molecule-like graph: per atom its type (an index into
    ``ATOMS``), its bonds as directed edges ``(src, dst, bond type)`` (each
    bond in both directions) and a graph label in ``0..MOLECULE_CLASSES-1``."""

    atoms: list[int]
    edges: list[tuple[int, int, int]]
    label: int


def molecule_label(atoms: list[int], edges: list[tuple[int, int, int]]) -> int:
    """The label of a structure: 2 if it has a ring (more bonds than a tree
    of its atoms), plus 1 if at least 30 % of its atoms are not carbon."""
    rings = len(edges) // 2 - len(atoms) + 1
    hetero = sum(1 for a in atoms if a != 0)
    return 2 * (rings > 0) + (10 * hetero >= 3 * len(atoms))


def molecules(count: int, seed: int = 0, min_atoms: int = 8, max_atoms: int = 30) -> list[Molecule]:
    """``count`` synthetic molecule-like graphs (seeded, deterministic): a
    random spanning tree over the atoms, each atom attached to an earlier
    one with a free bond, then up to three ring closures between atoms 4–5
    bonds apart (five- and six-membered rings), no atom over its degree."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(min_atoms, max_atoms)
        atoms = [0]  # a carbon first, so the tree can grow
        adj: list[list[int]] = [[]]
        bonds: list[tuple[int, int, int]] = []
        for v in range(1, n):
            free = [u for u in range(v) if len(adj[u]) < ATOM_DEGREE[atoms[u]]]
            a = rng.choices(range(len(ATOMS)), ATOM_WEIGHTS)[0]
            if len(free) == 1 and ATOM_DEGREE[a] == 1:
                a = 0  # a monovalent atom on the last free bond would end the tree
            u = rng.choice(free)
            atoms.append(a)
            adj.append([])
            adj[u].append(v)
            adj[v].append(u)
            bonds.append((u, v, rng.choices(range(len(BONDS)), BOND_WEIGHTS)[0]))
        for _ in range(rng.choice([0, 0, 0, 1, 2, 3])):
            pairs = [
                (u, w)
                for u in range(n)
                for w, d in _distances(adj, u).items()
                if u < w and d in (4, 5) and all(len(adj[x]) < ATOM_DEGREE[atoms[x]] for x in (u, w))
            ]
            if not pairs:
                break
            u, w = rng.choice(pairs)
            adj[u].append(w)
            adj[w].append(u)
            # A ring bond is aromatic half the time, as in benzene-like rings.
            bonds.append((u, w, 3 if rng.random() < 0.5 else 0))
        edges = [e for u, v, t in bonds for e in ((u, v, t), (v, u, t))]
        out.append(Molecule(atoms, edges, molecule_label(atoms, edges)))
    return out


def _distances(adj: list[list[int]], src: int) -> dict[int, int]:
    """Bond counts from ``src`` to every atom (breadth first)."""
    dist = {src: 0}
    todo = [src]
    for u in todo:
        for w in adj[u]:
            if w not in dist:
                dist[w] = dist[u] + 1
                todo.append(w)
    return dist
