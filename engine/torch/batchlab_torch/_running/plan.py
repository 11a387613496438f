"""A mini-batch as arrays: each sample's graph (a :class:`Fragment`, kept
between mini-batches when the sample object comes back) and their
concatenation (a :class:`Plan`, global node ids), which the schedules and
the execution read."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from .._flat import flatten
from .._recording.graph import Node, Src, feed_order
from .discover import Value

if TYPE_CHECKING:
    from .runner import Runner


class Fragment:
    """One sample's part of a mini-batch graph, with local node ids, as one
    integer matrix ``rec`` of a row per node: its kind (an index into the
    runner's kinds), how many producers it has as a sum and in all, then per
    tensor argument its producer (node, ``-1`` for none), that producer's
    output, and the node's integers; besides, a sum's producers (node,
    output) and every node's producers in argument order (what a schedule
    request sends), the kinds present and the (producer, consumer) kind
    pairs, each made once per sample rather than per mini-batch, and what
    ``model(sample)`` returned (``ret``): its leaves, and which of them are node
    outputs (``ret_at``, ``ret_node``, ``ret_k``) and one that is
    no node's (``ret_bad``)."""

    __slots__ = (
        "rec",
        "width",
        "snode",
        "sk",
        "gnode",
        "n",
        "kinds",
        "pairs",
        "ret_leaves",
        "ret_spec",
        "ret_at",
        "ret_node",
        "ret_k",
        "ret_bad",
    )

    def __init__(self, nodes: list[Node], local: dict[int, int], runner: Runner, ret: Any) -> None:
        n = len(nodes)
        w = max([max(len(x.args), len(x.ints)) for x in nodes if x.kind.what != "sum"] + [1])
        self.n, self.width = n, w
        rec = np.zeros((n, 3 + 3 * w), dtype=np.int64)
        rec[:, 3 : 3 + w] = -1
        snode, sk, gnode = [], [], []
        for i, x in enumerate(nodes):
            row = rec[i]
            row[0] = runner.kind_id(x.kind)
            had = len(gnode)
            if x.kind.what == "sum":
                for s in x.args:
                    if s is not None:
                        snode.append(local[s.node])
                        sk.append(s.k)
                        gnode.append(local[s.node])
                row[1] = len(gnode) - had
            else:
                for j, s in enumerate(x.args):
                    if s is not None:
                        row[3 + j] = local[s.node]
                        row[3 + w + j] = s.k
                        gnode.append(local[s.node])
                for p, v in x.ints.items():
                    row[3 + 2 * w + x.kind.data_slot[p]] = v
            row[2] = len(gnode) - had
        self.rec = rec
        self.snode = np.array(snode, dtype=np.int64)
        self.sk = np.array(sk, dtype=np.int64)
        self.gnode = np.array(gnode, dtype=np.int64)
        kid = rec[:, 0]
        self.kinds = frozenset(kid.tolist())
        consumer = np.repeat(kid, rec[:, 2])
        self.pairs = frozenset(zip(kid[self.gnode].tolist(), consumer.tolist()))
        self.ret_leaves, self.ret_spec = flatten(ret)
        at = [j for j, v in enumerate(self.ret_leaves) if isinstance(v, Value) and isinstance(v.src, Src)]
        self.ret_at = at
        self.ret_node = np.array([self.ret_leaves[j].src.node for j in at], dtype=np.int64)
        self.ret_k = np.array([self.ret_leaves[j].src.k for j in at], dtype=np.int64)
        # A placeholder returned that no node computes (bt.run refuses it).
        self.ret_bad = next((v for v in self.ret_leaves if isinstance(v, Value) and not isinstance(v.src, Src)), None)


class Plan:
    """A mini-batch: its fragments concatenated (global node ids). Made at
    once, what a schedule request sends: per node ``kid``, its ``instance``,
    every node's producers (CSR ``gptr``/``gnode``), the kinds ``present``
    in feeding order and each node's index among them (``type_of``), and
    ``offsets`` of the samples. The rest is made on first use, which
    :meth:`expand` forces (bt.run does while the schedule is computed): per
    node ``anode``/``ak``/``ints`` (a column per argument) and the sums'
    producers (CSR ``sptr``/``snode``/``sk``)."""

    def __init__(self, frags: list[Fragment]) -> None:
        self.frags = frags
        sizes = [f.n for f in frags]
        offs = np.cumsum([0] + sizes)
        self.offsets = offs
        self.n = int(offs[-1])
        self.instance = np.repeat(np.arange(len(frags)), sizes)
        self.kid = np.concatenate([f.rec[:, 0] for f in frags])
        self.gptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(np.concatenate([f.rec[:, 2] for f in frags]), out=self.gptr[1:])
        self.gnode = np.concatenate([f.gnode for f in frags]) + np.repeat(offs[:-1], [len(f.gnode) for f in frags])
        # The kinds present, in feeding order as a recording numbers its
        # types (feed_order; kind ids are first-call order), from each
        # sample's kinds and kind pairs rather than from every edge.
        kinds = sorted(frozenset().union(*(f.kinds for f in frags)))
        edges = frozenset().union(*(f.pairs for f in frags))
        self.present = np.array(feed_order(kinds, set(edges)), dtype=np.int64)
        index = np.full(max(kinds) + 1 if kinds else 1, -1, dtype=np.int64)
        index[self.present] = np.arange(len(self.present))
        self.type_of = index[self.kid]
        self.flat_width = 0  # expand's width (0: not expanded yet)

    def expand(self, width: int = 1) -> None:
        """Makes the per-argument arrays now (see the class docs), and for
        an execution whose row table has ``width`` outputs per node, each
        argument as an index into that table flattened (``arg_flat``; an
        absent producer points past the last node, at a row of zeros) and
        its producer (``arg_node``, ``n`` for none)."""
        anode = self.anode
        ok = anode >= 0
        self.arg_node = np.where(ok, anode, self.n)
        self.arg_flat = self.arg_node * width + np.where(ok, self.ak, 0)
        self.flat_width = width
        self.ints  # noqa: B018
        self.snode  # noqa: B018
        self.sk  # noqa: B018
        self.sptr  # noqa: B018

    @cached_property
    def _rec(self) -> np.ndarray:
        frags = self.frags
        width = max(f.width for f in frags)

        def widen(f: Fragment) -> np.ndarray:
            if f.width == width:
                return f.rec
            out = np.zeros((f.n, 3 + 3 * width), dtype=np.int64)
            out[:, 3 : 3 + width] = -1
            for part in range(3):
                a, b = 3 + part * f.width, 3 + part * width
                out[:, b : b + f.width] = f.rec[:, a : a + f.width]
            out[:, :3] = f.rec[:, :3]
            return out

        return np.concatenate([widen(f) for f in frags])

    @cached_property
    def anode(self) -> np.ndarray:
        rec = self._rec
        width = (rec.shape[1] - 3) // 3
        # Local ids become global by adding the sample's offset, once over
        # the whole array rather than per sample.
        anode = rec[:, 3 : 3 + width]
        return np.where(anode >= 0, anode + self.offsets[self.instance][:, None], -1)

    @cached_property
    def ak(self) -> np.ndarray:
        width = (self._rec.shape[1] - 3) // 3
        return np.ascontiguousarray(self._rec[:, 3 + width : 3 + 2 * width])

    @cached_property
    def ints(self) -> np.ndarray:
        width = (self._rec.shape[1] - 3) // 3
        return np.ascontiguousarray(self._rec[:, 3 + 2 * width :])

    @cached_property
    def sptr(self) -> np.ndarray:
        sptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(self._rec[:, 1], out=sptr[1:])
        return sptr

    @cached_property
    def snode(self) -> np.ndarray:
        frags, offs = self.frags, self.offsets
        return np.concatenate([f.snode for f in frags]) + np.repeat(offs[:-1], [len(f.snode) for f in frags])

    @cached_property
    def sk(self) -> np.ndarray:
        return np.concatenate([f.sk for f in self.frags])
