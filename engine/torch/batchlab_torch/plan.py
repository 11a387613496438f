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
    """One sample's part of a mini-batch graph, with local node ids: per
    node its kind (an index into the runner's kinds), its producers per
    tensor argument (node and output, ``-1`` for none), its integers, a
    sum's producers (CSR), and what ``model(sample)`` returned."""

    __slots__ = ("kid", "anode", "ak", "ints", "sptr", "snode", "sk", "ret", "n")

    def __init__(self, nodes: list[Node], local: dict[int, int], runner: Runner, ret: Any) -> None:
        n = len(nodes)
        width = max([max(len(x.args), len(x.ints)) for x in nodes if x.kind.what != "sum"] + [1])
        self.n = n
        self.kid = np.array([runner.kind_id(x.kind) for x in nodes], dtype=np.int64)
        self.anode = np.full((n, width), -1, dtype=np.int64)
        self.ak = np.zeros((n, width), dtype=np.int64)
        self.ints = np.zeros((n, width), dtype=np.int64)
        sptr, snode, sk = [0], [], []
        for i, x in enumerate(nodes):
            if x.kind.what == "sum":
                for s in x.args:
                    if s is not None:
                        snode.append(local[s.node])
                        sk.append(s.k)
            else:
                for j, s in enumerate(x.args):
                    if s is not None:
                        self.anode[i, j] = local[s.node]
                        self.ak[i, j] = s.k
                for p, v in x.ints.items():
                    self.ints[i, x.kind.data_slot[p]] = v
            sptr.append(len(snode))
        self.sptr = np.array(sptr, dtype=np.int64)
        self.snode = np.array(snode, dtype=np.int64)
        self.sk = np.array(sk, dtype=np.int64)
        self.ret = ret


class Plan:
    """A mini-batch: its fragments concatenated (global node ids)."""

    def __init__(self, frags: list[Fragment]) -> None:
        width = max(f.anode.shape[1] for f in frags)
        offs = np.cumsum([0] + [f.n for f in frags])
        self.offsets = offs
        self.n = int(offs[-1])

        def pad(a: np.ndarray, fill: int) -> np.ndarray:
            if a.shape[1] == width:
                return a
            out = np.full((a.shape[0], width), fill, dtype=a.dtype)
            out[:, : a.shape[1]] = a
            return out

        self.kid = np.concatenate([f.kid for f in frags])
        self.anode = np.concatenate([pad(np.where(f.anode >= 0, f.anode + o, -1), -1) for f, o in zip(frags, offs)])
        self.ak = np.concatenate([pad(f.ak, 0) for f in frags])
        self.ints = np.concatenate([pad(f.ints, 0) for f in frags])
        sp = [frags[0].sptr[:1]]
        base = 0
        for f in frags:
            sp.append(f.sptr[1:] + base)
            base += len(f.snode)
        self.sptr = np.concatenate(sp)
        self.snode = np.concatenate([f.snode + o for f, o in zip(frags, offs)])
        self.sk = np.concatenate([f.sk for f in frags])
        self.instance = np.repeat(np.arange(len(frags)), [f.n for f in frags])
