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
    sum's producers (CSR), every node's producers in argument order (CSR:
    what a schedule request sends, made once per sample rather than per
    mini-batch), and what ``model(sample)`` returned."""

    __slots__ = ("kid", "anode", "ak", "ints", "sptr", "snode", "sk", "gptr", "gnode", "ret", "n")

    def __init__(self, nodes: list[Node], local: dict[int, int], runner: Runner, ret: Any) -> None:
        n = len(nodes)
        width = max([max(len(x.args), len(x.ints)) for x in nodes if x.kind.what != "sum"] + [1])
        self.n = n
        self.kid = np.array([runner.kind_id(x.kind) for x in nodes], dtype=np.int64)
        self.anode = np.full((n, width), -1, dtype=np.int64)
        self.ak = np.zeros((n, width), dtype=np.int64)
        self.ints = np.zeros((n, width), dtype=np.int64)
        sptr, snode, sk = [0], [], []
        gptr, gnode = [0], []
        for i, x in enumerate(nodes):
            if x.kind.what == "sum":
                for s in x.args:
                    if s is not None:
                        snode.append(local[s.node])
                        sk.append(s.k)
                        gnode.append(local[s.node])
            else:
                for j, s in enumerate(x.args):
                    if s is not None:
                        self.anode[i, j] = local[s.node]
                        self.ak[i, j] = s.k
                        gnode.append(local[s.node])
                for p, v in x.ints.items():
                    self.ints[i, x.kind.data_slot[p]] = v
            sptr.append(len(snode))
            gptr.append(len(gnode))
        self.sptr = np.array(sptr, dtype=np.int64)
        self.snode = np.array(snode, dtype=np.int64)
        self.sk = np.array(sk, dtype=np.int64)
        self.gptr = np.array(gptr, dtype=np.int64)
        self.gnode = np.array(gnode, dtype=np.int64)
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

        sizes = [f.n for f in frags]
        self.instance = np.repeat(np.arange(len(frags)), sizes)
        self.kid = np.concatenate([f.kid for f in frags])
        # Local ids become global by adding the sample's offset, once over
        # the whole array rather than per sample.
        anode = np.concatenate([pad(f.anode, -1) for f in frags])
        self.anode = np.where(anode >= 0, anode + offs[self.instance][:, None], -1)
        self.ak = np.concatenate([pad(f.ak, 0) for f in frags])
        self.ints = np.concatenate([pad(f.ints, 0) for f in frags])
        self.sptr = _join_ptr([f.sptr for f in frags])
        self.snode = np.concatenate([f.snode for f in frags]) + np.repeat(offs[:-1], [len(f.snode) for f in frags])
        self.sk = np.concatenate([f.sk for f in frags])
        self.gptr = _join_ptr([f.gptr for f in frags])
        self.gnode = np.concatenate([f.gnode for f in frags]) + np.repeat(offs[:-1], [len(f.gnode) for f in frags])


def _join_ptr(ptrs: list[np.ndarray]) -> np.ndarray:
    """CSR row pointers of fragments joined end to end."""
    ends = np.cumsum([0] + [int(p[-1]) for p in ptrs[:-1]])
    rest = np.concatenate([p[1:] for p in ptrs]) + np.repeat(ends, [len(p) - 1 for p in ptrs])
    return np.concatenate([ptrs[0][:1], rest])
