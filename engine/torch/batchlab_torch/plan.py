"""A mini-batch as arrays: each sample's graph (a :class:`Fragment`, kept
between mini-batches when the sample object comes back) and their
concatenation (a :class:`Plan`, global node ids), which the schedules and
the execution read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .graph import Node

if TYPE_CHECKING:
    from .runner import Runner


class Fragment:
    """One sample's part of a mini-batch graph, with local node ids, as one
    integer matrix ``rec`` of a row per node: its kind (an index into the
    runner's kinds), how many producers it has as a sum and in all, then per
    tensor argument its producer (node, ``-1`` for none), that producer's
    output, and the node's integers; besides, a sum's producers (node,
    output) and every node's producers in argument order (what a schedule
    request sends), each made once per sample rather than per mini-batch,
    and what ``model(sample)`` returned."""

    __slots__ = ("rec", "width", "snode", "sk", "gnode", "ret", "n")

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
        self.ret = ret


class Plan:
    """A mini-batch: its fragments concatenated (global node ids): per node
    ``kid``, ``anode``/``ak``/``ints`` (a column per argument), the sums'
    producers (CSR ``sptr``/``snode``/``sk``), every node's producers (CSR
    ``gptr``/``gnode``), its ``instance``; ``offsets`` of the samples."""

    def __init__(self, frags: list[Fragment]) -> None:
        width = max(f.width for f in frags)
        sizes = [f.n for f in frags]
        offs = np.cumsum([0] + sizes)
        self.offsets = offs
        self.n = n = int(offs[-1])

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

        rec = np.concatenate([widen(f) for f in frags])
        self.instance = np.repeat(np.arange(len(frags)), sizes)
        self.kid = rec[:, 0]
        # Local ids become global by adding the sample's offset, once over
        # the whole array rather than per sample.
        anode = rec[:, 3 : 3 + width]
        self.anode = np.where(anode >= 0, anode + offs[self.instance][:, None], -1)
        self.ak = rec[:, 3 + width : 3 + 2 * width]
        self.ints = rec[:, 3 + 2 * width :]
        self.sptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(rec[:, 1], out=self.sptr[1:])
        self.gptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(rec[:, 2], out=self.gptr[1:])
        self.snode = np.concatenate([f.snode for f in frags]) + np.repeat(offs[:-1], [len(f.snode) for f in frags])
        self.sk = np.concatenate([f.sk for f in frags])
        self.gnode = np.concatenate([f.gnode for f in frags]) + np.repeat(offs[:-1], [len(f.gnode) for f in frags])
