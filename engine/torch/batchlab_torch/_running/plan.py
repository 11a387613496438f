"""A mini-batch as arrays: the graph of some samples (a :class:`Fragment`:
all the samples discovered together, or one sample kept between
mini-batches when its object comes back) and their concatenation (a
:class:`Plan`, global node ids), which the schedules and the execution
read."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from .._flat import flatten
from .._recording.graph import Finished, Kind, Src, feed_order
from .discover import Value


class Returned:
    """What ``model(sample)`` returned: its leaves, which of them are node
    outputs (``at``; their nodes ``node`` and outputs ``k``, ids local to
    the fragment) and a placeholder returned that no node made (``bad``:
    bt.run refuses it)."""

    __slots__ = ("leaves", "spec", "at", "node", "k", "bad")

    def __init__(self, ret: Any, renumber: np.ndarray, base: int) -> None:
        self.leaves, self.spec = flatten(ret)
        at = [j for j, v in enumerate(self.leaves) if type(v) is Value and type(v.src) is Src]
        self.at = at
        self.node = np.array([renumber[self.leaves[j].src.node] - base for j in at], dtype=np.int64)
        self.k = np.array([self.leaves[j].src.k for j in at], dtype=np.int64)
        self.bad = next((v for v in self.leaves if type(v) is Value and type(v.src) is not Src), None)

    def shifted(self, by: int) -> Returned:
        r = object.__new__(Returned)
        r.leaves, r.spec, r.at, r.k, r.bad = self.leaves, self.spec, self.at, self.k, self.bad
        r.node = self.node - by
        return r


class Fragment:
    """The graph of ``samples`` consecutive samples, node ids local to it:
    per node its kind index, its sample (local), its arguments (CSR
    ``aptr``; producer ``anode``, ``-1`` for an absent input, output
    ``ak``; a sum's are its terms) and its integer inputs (CSR
    ``dptr``/``dval``); per sample what it returned."""

    __slots__ = (
        "n",
        "samples",
        "kid",
        "inst",
        "aptr",
        "anode",
        "ak",
        "dptr",
        "dval",
        "rets",
        "acount",
        "dcount",
        "_kinds",
        "_pairs",
    )

    def __init__(
        self,
        kid: np.ndarray,
        inst: np.ndarray,
        aptr: np.ndarray,
        anode: np.ndarray,
        ak: np.ndarray,
        dptr: np.ndarray,
        dval: np.ndarray,
        rets: list[Returned],
    ) -> None:
        self.n = len(kid)
        self.samples = len(rets)
        self.kid, self.inst, self.aptr, self.anode, self.ak = kid, inst, aptr, anode, ak
        self.dptr, self.dval, self.rets = dptr, dval, rets
        self.acount = np.diff(aptr)
        self.dcount = np.diff(dptr)
        self._kinds: frozenset[int] | None = None
        self._pairs: frozenset[tuple[int, int]] | None = None

    @property
    def kinds(self) -> frozenset[int]:
        """The kinds of its nodes (made once: a fragment kept between
        mini-batches is read again by every Plan it is part of)."""
        if self._kinds is None:
            self._kinds = frozenset(np.unique(self.kid).tolist())
        return self._kinds

    @property
    def pairs(self) -> frozenset[tuple[int, int]]:
        """The (producer kind, consumer kind) pairs of its edges."""
        if self._pairs is None:
            ok = self.anode >= 0
            consumer = np.repeat(self.kid, self.acount)[ok]
            producer = self.kid[self.anode[ok]]
            k = int(self.kid.max()) + 1 if self.n else 1
            codes = np.unique(producer * k + consumer).tolist()
            self._pairs = frozenset((c // k, c % k) for c in codes)
        return self._pairs

    @classmethod
    def of(cls, f: Finished, returns: list[Any]) -> Fragment:
        """The fragment of a finished discovery of ``len(returns)`` samples."""
        rets = [Returned(r, f.renumber, 0) for r in returns]
        return cls(f.kid, f.inst, f.aptr, f.anode, f.ak, f.dptr, f.dval, rets)

    def per_sample(self) -> list[Fragment]:
        """One fragment per sample (a sample's nodes are consecutive: the
        forward runs one sample after another)."""
        if self.samples == 1:
            return [self]
        bounds = np.searchsorted(self.inst, np.arange(self.samples + 1), side="left")
        out = []
        for j in range(self.samples):
            lo, hi = int(bounds[j]), int(bounds[j + 1])
            a0, a1 = int(self.aptr[lo]), int(self.aptr[hi])
            d0, d1 = int(self.dptr[lo]), int(self.dptr[hi])
            an = self.anode[a0:a1]
            out.append(
                Fragment(
                    self.kid[lo:hi],
                    np.zeros(hi - lo, dtype=np.int64),
                    self.aptr[lo : hi + 1] - a0,
                    np.where(an >= 0, an - lo, -1),
                    self.ak[a0:a1],
                    self.dptr[lo : hi + 1] - d0,
                    self.dval[d0:d1],
                    [self.rets[j].shifted(lo)],
                )
            )
        return out


class Plan:
    """A mini-batch: its fragments concatenated (global node ids). Made at
    once, what a schedule request sends: per node ``kid``, its ``instance``,
    every node's producers (CSR ``gptr``/``gnode``), the kinds ``present``
    in feeding order and each node's index among them (``type_of``), and
    ``frag_offsets`` (each fragment's first node). The rest is made on first
    use, which :meth:`expand` forces (bt.run does while the schedule is
    computed): per node ``anode``/``ak``/``ints`` (a column per argument)
    and the sums' producers (CSR ``sptr``/``snode``/``sk``)."""

    def __init__(self, frags: list[Fragment], kinds: list[Kind]) -> None:
        self.frags = frags
        sizes = np.array([f.n for f in frags], dtype=np.int64)
        offs = np.zeros(len(frags) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offs[1:])
        self.frag_offsets = offs
        self.n = n = int(offs[-1])
        if len(frags) == 1:
            f = frags[0]
            self.kid, self.instance = f.kid, f.inst
            self.aptr, self.a_node, self.a_k, counts = f.aptr, f.anode, f.ak, f.acount
            self.dptr, self.dval = f.dptr, f.dval
        else:
            # One concatenation per array, the ids shifted at once.
            self.kid = np.concatenate([f.kid for f in frags])
            if all(f.samples == 1 for f in frags):
                self.instance = np.repeat(np.arange(len(frags), dtype=np.int64), sizes)
            else:
                nsamp = np.array([f.samples for f in frags], dtype=np.int64)
                soffs = np.concatenate([[0], np.cumsum(nsamp)[:-1]]).tolist()
                self.instance = np.concatenate([f.inst + o for f, o in zip(frags, soffs)])
            counts = np.concatenate([f.acount for f in frags])
            self.aptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(counts, out=self.aptr[1:])
            raw = np.concatenate([f.anode for f in frags])
            shift = np.repeat(offs[:-1], [len(f.anode) for f in frags])
            self.a_node = np.where(raw >= 0, raw + shift, -1)
            self.a_k = np.concatenate([f.ak for f in frags])
            self.dptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.concatenate([f.dcount for f in frags]), out=self.dptr[1:])
            self.dval = np.concatenate([f.dval for f in frags])
        self.consumer = np.repeat(np.arange(n, dtype=np.int64), counts)
        valid = self.a_node >= 0
        self.gnode = self.a_node[valid]
        self.gptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.consumer[valid], minlength=n), out=self.gptr[1:])
        sums = np.array([k.what == "sum" for k in kinds] or [False])
        self.is_sum = sums[self.kid] if n else np.zeros(0, dtype=bool)
        # The kinds present, in feeding order as a recording numbers its
        # types (feed_order; kind ids are first-seen order), from each
        # fragment's kinds and kind pairs (made once per fragment).
        present = sorted(frozenset().union(*(f.kinds for f in frags)))
        edges = set(frozenset().union(*(f.pairs for f in frags)))
        self.present = np.array(feed_order(present, edges), dtype=np.int64)
        index = np.full(len(kinds) + 1, -1, dtype=np.int64)
        index[self.present] = np.arange(len(self.present))
        self.type_of = index[self.kid]

    def prepare(self) -> None:
        """Makes now what an execution reads (bt.run calls it while the
        schedule is computed): per argument its position (``col``) and
        whether it is a plain node's (``plain``; a sum's arguments are its
        terms, read as a segment: ``sptr``/``snode``/``sk``), the widest
        plain node (``width``), and per integer input its node and column."""
        self._columns  # noqa: B018
        self.plain  # noqa: B018
        self.sptr  # noqa: B018
        self.snode  # noqa: B018
        self.sk  # noqa: B018
        self.dcols  # noqa: B018

    @cached_property
    def plain(self) -> np.ndarray:
        """Per argument: whether its node is not a sum."""
        return ~self.is_sum[self.consumer]

    @property
    def col(self) -> np.ndarray:
        return self._columns[1]

    @cached_property
    def width(self) -> int:
        """The most arguments of a plain node (at least 1)."""
        c = self.col[self.plain]
        return int(c.max()) + 1 if len(c) else 1

    @cached_property
    def dcols(self) -> tuple[np.ndarray, np.ndarray]:
        """Per integer input: its node and its column."""
        counts = np.diff(self.dptr)
        rows = np.repeat(np.arange(self.n, dtype=np.int64), counts)
        col = np.arange(len(self.dval), dtype=np.int64) - np.repeat(self.dptr[:-1], counts)
        return rows, col

    @cached_property
    def _columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Per argument (in the flat arrays): its node, and its position
        among the node's arguments."""
        col = np.arange(len(self.a_node), dtype=np.int64) - np.repeat(self.aptr[:-1], np.diff(self.aptr))
        return self.consumer, col

    def _matrix(self, values: np.ndarray, fill: int) -> np.ndarray:
        rows, col = self._columns
        plain = ~self.is_sum[rows]
        width = int(col[plain].max()) + 1 if plain.any() else 1
        out = np.full((self.n, width), fill, dtype=np.int64)
        out[rows[plain], col[plain]] = values[plain]
        return out

    @cached_property
    def anode(self) -> np.ndarray:
        """Per node (a row; sums' rows are ``-1``) its argument producers."""
        return self._matrix(self.a_node, -1)

    @cached_property
    def ak(self) -> np.ndarray:
        return self._matrix(self.a_k, 0)

    @cached_property
    def ints(self) -> np.ndarray:
        """Per node its integer inputs, a column per data position."""
        counts = np.diff(self.dptr)
        width = int(counts.max()) if self.n and len(self.dval) else 0
        out = np.zeros((self.n, width), dtype=np.int64)
        if width:
            rows = np.repeat(np.arange(self.n, dtype=np.int64), counts)
            col = np.arange(len(self.dval), dtype=np.int64) - np.repeat(self.dptr[:-1], counts)
            out[rows, col] = self.dval
        return out

    @cached_property
    def _sum_args(self) -> np.ndarray:
        rows, _ = self._columns
        return self.is_sum[rows] & (self.a_node >= 0)

    @cached_property
    def sptr(self) -> np.ndarray:
        sel = self._sum_args
        sptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self._columns[0][sel], minlength=self.n), out=sptr[1:])
        return sptr

    @cached_property
    def snode(self) -> np.ndarray:
        return self.a_node[self._sum_args]

    @cached_property
    def sk(self) -> np.ndarray:
        return self.a_k[self._sum_args]
