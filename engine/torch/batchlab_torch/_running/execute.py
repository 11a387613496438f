"""Executing a scheduled mini-batch with the user's own modules.

Every node output lives in a row of a store, one store per per-instance
shape and dtype (row 0 stays zeros: an absent input reads it). Rows are
handed out in schedule order, so a batch writes each output into one
contiguous block. What is the same in every mini-batch (each kind's
stores and integer columns) is worked out once per runner
(:class:`KindTable`); per mini-batch every argument's rows are one array
(a batch's index tensor is a slice of it), and which of them are one block
of rows, so running a batch is: one gather of every argument (a view,
without autograd, where the rows are one block),
one call of the cell (:class:`Caller`), one block copy of every output.

Under autograd the gather and the scatter are one custom function each
(:class:`_Gather`, :class:`_Scatter`): the scatter returns a token the
later gathers take, so the backward of a batch runs after every batch that
read its rows has added their gradients into the store's gradient buffer.
A step's backward then costs what its rows cost, never a copy of a whole
buffer.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from .._flat import flatten as tree_flatten
from .._flat import unflatten as tree_unflatten
from .._recording.graph import Kind, RecordError
from .discover import Known
from .plan import Plan

if TYPE_CHECKING:
    from .runner import Runner


class _Store:
    """One buffer of rows of a per-instance shape and dtype. Its data comes
    from ``pool`` when given: every row but 0 is written before it is read,
    and no backward reads the data, so a buffer serves one mini-batch after
    another (a fresh one costs its page faults every time)."""

    def __init__(
        self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, rows: int, pool: dict | None = None
    ) -> None:
        self.shape = shape
        key = (shape, dtype, device)
        buf = pool.get(key) if pool is not None else None
        if buf is None or buf.shape[0] < rows + 1:
            buf = torch.empty(
                (max(rows + 1, 2 * (buf.shape[0] if buf is not None else 0)),) + shape, dtype=dtype, device=device
            )
            if pool is not None:
                pool[key] = buf
        self.data = buf[: rows + 1]
        self.data[0].zero_()
        self.grad: torch.Tensor | None = None

    def grad_buffer(self) -> torch.Tensor:
        if self.grad is None:
            self.grad = torch.zeros_like(self.data)
        return self.grad


Rows = tuple[tuple[_Store, torch.Tensor], ...]  # store, the rows read
Blocks = tuple[tuple[_Store, int, int], ...]  # store, first row, row count


class _Gather(torch.autograd.Function):
    """Reads rows of stores, after the steps whose tokens it takes; its
    backward adds each read's gradient into its store's gradient buffer."""

    @staticmethod
    def forward(ctx: Any, reads: Rows, *tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
        ctx.reads, ctx.tokens = reads, len(tokens)
        ctx.set_materialize_grads(False)
        return tuple(s.data.index_select(0, i) for s, i in reads)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> Any:  # type: ignore[override]
        empty = None
        for (s, i), g in zip(ctx.reads, grads):
            if g is not None:
                s.grad_buffer().index_add_(0, i, g)
                empty = g
        token_grad = empty.new_empty(0) if empty is not None else torch.empty(0)
        return (None,) + (token_grad,) * ctx.tokens


class _Scatter(torch.autograd.Function):
    """Writes a step's outputs into their blocks; returns a token whose
    backward hands the blocks' accumulated gradients back to the step."""

    @staticmethod
    def forward(ctx: Any, writes: Blocks, *values: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        for (s, a, n), v in zip(writes, values):
            s.data.narrow(0, a, n).copy_(v.detach())
        ctx.writes = writes
        return values[0].new_empty(0)

    @staticmethod
    def backward(ctx: Any, _token: torch.Tensor) -> Any:  # type: ignore[override]
        out: list[Any] = [None]
        for s, a, n in ctx.writes:
            if s.grad is None:
                out.append(torch.zeros((n,) + s.shape, dtype=s.data.dtype, device=s.data.device))
            else:
                # A copy: autograd may accumulate into what it is handed.
                out.append(s.grad.narrow(0, a, n).clone())
        return tuple(out)


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name.replace("torch.", ""))


def base_key(key: tuple) -> tuple:
    """A loss twin's key without its ``loss`` mark (the call is the same)."""
    return key[:-1] if key and key[-1] == "loss" else key


@dataclass
class KindPlan:
    """What running a batch of one kind needs, worked out once per runner:
    the store of each output and of each tensor input, per integer input
    its position, column and dtype, and the outputs grouped by store
    (first appearance first): a batch writes a store's outputs at once."""

    kind: Kind
    outs: list[int]
    ins: list[int]
    data: list[tuple[int, int, torch.dtype]]
    caller: Caller | None = None  # made on the kind's first batch

    def __post_init__(self) -> None:
        self.out_groups = _groups(self.outs)


def _groups(stores: list[int]) -> list[tuple[int, list[int]]]:
    """Positions by store, stores in order of first appearance."""
    by: dict[int, list[int]] = {}
    for j, st in enumerate(stores):
        by.setdefault(st, []).append(j)
    return list(by.items())


class KindTable:
    """A runner's stores by (per-instance shape, dtype), numbered once, and
    each kind's :class:`KindPlan`: what is the same in every mini-batch is
    not worked out again per mini-batch."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.keys: dict[tuple, int] = {}
        self.plans: dict[int, KindPlan] = {}
        self._out_store = np.full((0, 1), -1, dtype=np.int64)

    def store(self, key: tuple) -> int:
        return self.keys.setdefault(key, len(self.keys))

    def plan(self, q: int) -> KindPlan:
        p = self.plans.get(q)
        if p is None:
            runner = self.runner
            kind = runner.kind_list[q]
            outs = [self.store(key) for key in runner.out_keys(kind)]
            ins = [self.store((tuple(kind.leaves[i][1]), _dtype(kind.leaves[i][2]))) for i in kind.tensor_positions]
            data = [(i, kind.data_slot[i], _dtype(leaf[2])) for i, leaf in enumerate(kind.leaves) if leaf[0] == "data"]
            p = KindPlan(kind, outs, ins, data)
            if runner.known.get(base_key(kind.key)) is not None:  # its output dtypes are final
                self.plans[q] = p
        return p

    def out_store(self) -> np.ndarray:
        """Per kind and output, its store (-1: no such output)."""
        kinds = self.runner.kind_list
        if self._out_store.shape[0] != len(kinds):
            plans = [self.plan(q) for q in range(len(kinds))]
            width = max([len(p.outs) for p in plans] + [1])
            table = np.full((len(kinds), width), -1, dtype=np.int64)
            for q, p in enumerate(plans):
                table[q, : len(p.outs)] = p.outs
            self._out_store = table
        return self._out_store


class Execution:
    """A mini-batch's stores and row assignment, run in schedule order."""

    def __init__(self, runner: Runner, plan: Plan, batches: list[np.ndarray], grad: bool) -> None:
        self.runner = runner
        self.plan = plan
        self.grad = grad
        dev = runner.device
        table = runner.table
        out_store = self.out_store = table.out_store()
        width = out_store.shape[1]
        nb = len(batches)
        # Rows in schedule order: each batch's outputs are one block per
        # output (its first row in ``first``).
        sizes = np.fromiter(map(len, batches), dtype=np.int64, count=nb)
        start = np.zeros(nb + 1, dtype=np.int64)
        np.cumsum(sizes, out=start[1:])
        order = np.concatenate(batches)
        self.bplans = bplans = [table.plan(q) for q in plan.kid[order[start[:-1]]].tolist()]
        counts = [0] * len(table.keys)
        first = np.zeros((width, nb), dtype=np.int64)
        self.first = firsts = []
        for bi, (kp, b) in enumerate(zip(bplans, sizes.tolist())):
            fs = []
            for s in kp.outs:
                fs.append(counts[s] + 1)
                counts[s] += b
            first[: len(fs), bi] = fs
            firsts.append(fs)
        # A row per node, and one of zeros after them (what an absent
        # producer's argument reads: row 0).
        self.out_row = out_row = np.zeros((plan.n + 1, width), dtype=np.int64)
        rank = np.arange(plan.n) - np.repeat(start[:-1], sizes)
        for k in range(width):
            has = np.repeat(first[k] > 0, sizes)
            out_row[order[has], k] = (np.repeat(first[k], sizes) + rank)[has]
        # One store per shape a batch reads or writes (one that only
        # absent inputs read is row 0's zeros alone).
        used = sorted({s for kp in {id(kp): kp for kp in bplans}.values() for s in (*kp.outs, *kp.ins)})
        keys = list(table.keys)
        self.stores: list[_Store | None] = [None] * len(keys)
        for s in used:
            self.stores[s] = _Store(keys[s][0], keys[s][1], dev, counts[s], runner.buffers)
        self.sizes = sizes.tolist()
        self.start = start.tolist()
        self.step_of = np.full(plan.n + 1, -1, dtype=np.int64)
        self.step_of[order] = np.repeat(np.arange(nb), sizes)
        self.order = order
        # Every argument's row at once, one line per argument position with
        # the nodes in schedule order: a batch's index tensor is a slice of
        # it (an absent argument reads row 0, zeros).
        plan.prepare()
        rank = np.empty(plan.n, dtype=np.int64)
        rank[order] = np.arange(plan.n, dtype=np.int64)
        sel = plan.plain
        prod, kk = plan.a_node[sel], plan.a_k[sel]
        col, at = plan.col[sel], rank[plan.consumer[sel]]
        ok = prod >= 0
        ar = np.zeros((plan.width, plan.n), dtype=np.int64)
        ar[col[ok], at[ok]] = out_row[prod[ok], kk[ok]]
        self.arg_row = ar
        # Which step made each argument: what a backward orders by.
        if grad:
            self.arg_step = np.full((plan.width, plan.n), -1, dtype=np.int64)
            self.arg_step[col[ok], at[ok]] = self.step_of[prod[ok]]
        else:
            self.arg_step = None
        # Per argument position and batch: the first row when the batch
        # reads that argument's rows as one block of produced rows
        # (ascending by one, not the zeros of row 0), else 0.
        lo, last = start[:-1], start[1:] - 1
        runs = np.zeros(ar.shape, dtype=np.int64)
        np.cumsum(np.diff(ar, axis=1) == 1, axis=1, out=runs[:, 1:])
        block = (runs[:, last] - runs[:, lo] == last - lo) & (ar[:, lo] > 0)
        self.block_first = np.where(block, ar[:, lo], 0).tolist()
        self.arg_row_t = torch.from_numpy(ar).to(dev)
        cols = max(len(kp.data) for kp in bplans) if bplans else 0
        if cols:
            dnode, dcol = plan.dcols
            it = np.zeros((cols, plan.n), dtype=np.int64)
            keep = dcol < cols
            it[dcol[keep], rank[dnode[keep]]] = plan.dval[keep]
            self.ints_t = torch.from_numpy(it).to(dev)
        else:
            self.ints_t = None
        self.tokens: list[torch.Tensor | None] = []

    def _idx(self, rows: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int64))
        return t if self.runner.device.type == "cpu" else t.to(self.runner.device)

    def _sum_reads(self, bi: int) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
        """A sum batch's producer rows (every slot, node by node), the
        nodes that made them, and each row's segment (its node in the batch)."""
        plan = self.plan
        lo, b = self.start[bi], self.sizes[bi]
        ids = self.order[lo : lo + b]
        starts, ends = plan.sptr[ids], plan.sptr[ids + 1]
        lens = ends - starts
        sel = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        nodes, ks = plan.snode[sel], plan.sk[sel]
        ok = nodes >= 0
        safe = np.where(ok, nodes, 0)
        rows = np.where(ok, self.out_row[safe, ks], 0)
        return rows, nodes[ok], self._idx(np.repeat(np.arange(b), lens))

    def _deps(self, bi: int, n_in: int, made: np.ndarray | None) -> list[int]:
        """The steps whose outputs batch ``bi`` reads (what its gather waits for)."""
        if made is None:
            assert self.arg_step is not None
            lo = self.start[bi]
            made = self.arg_step[:n_in, lo : lo + self.sizes[bi]].ravel()
        else:
            made = self.step_of[made]
        return [d for d in np.unique(made).tolist() if d >= 0]

    def run(self) -> None:
        self.tokens = tokens = [None] * len(self.bplans)
        caller = self.runner.caller
        grad, stores, ar_t, ints_t = self.grad, self.stores, self.arg_row_t, self.ints_t
        for bi, kp in enumerate(self.bplans):
            kind, b, lo = kp.kind, self.sizes[bi], self.start[bi]
            hi = lo + b
            what = kind.what
            if what == "sum":
                rows, made, seg = self._sum_reads(bi)
                s = stores[kp.ins[0]]
                assert s is not None
                if grad:
                    toks = [t for t in (tokens[d] for d in self._deps(bi, 1, made)) if t is not None]
                    ins = list(_Gather.apply(((s, self._idx(rows)),), *toks))
                else:
                    blk = _block(rows)
                    ins = [
                        s.data.narrow(0, blk[0], blk[1]) if blk is not None else s.data.index_select(0, self._idx(rows))
                    ]
                x = ins[0]
                outs = [torch.zeros((b,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device).index_add(0, seg, x)]
            else:
                if grad:
                    reads = tuple((stores[s], ar_t[j, lo:hi]) for j, s in enumerate(kp.ins))
                    if reads:
                        toks = [t for t in (tokens[d] for d in self._deps(bi, len(reads), None)) if t is not None]
                        ins = list(_Gather.apply(reads, *toks))
                    else:
                        ins = []
                else:
                    # A block is read in place (nothing writes it again in
                    # this mini-batch) by a kind checked not to change its
                    # inputs.
                    if kp.caller is None and what != "mean":
                        kp.caller = caller(kind)
                    views = what == "mean" or kp.caller.known.mode is not None  # type: ignore[union-attr]
                    ins = []
                    for j, s in enumerate(kp.ins):
                        data = stores[s].data  # type: ignore[union-attr]
                        f = self.block_first[j][bi]
                        ins.append(data.narrow(0, f, b) if views and f else data.index_select(0, ar_t[j, lo:hi]))
                if what == "mean":
                    acc = ins[0]
                    for x in ins[1:]:
                        acc = acc + x
                    outs = [acc / len(ins)]
                else:
                    assert ints_t is not None or not kp.data
                    data_in = {p: ints_t[col, lo:hi].to(dt) for p, col, dt in kp.data}  # type: ignore[index]
                    call = kp.caller
                    if call is None:
                        call = kp.caller = caller(kind)
                    outs = call(ins, data_in, b)
            writes = tuple((stores[s], a, b) for s, a in zip(kp.outs, self.first[bi]))
            vals = [o if o.shape[1:] == s.shape else o.reshape((b,) + s.shape) for o, (s, _, _) in zip(outs, writes)]
            if grad and any(v.requires_grad for v in vals):
                tokens[bi] = _Scatter.apply(writes, *vals)
            else:
                # A store's outputs are consecutive blocks: one write each.
                for st, ks in kp.out_groups:
                    store, a = stores[st], self.first[bi][ks[0]]
                    assert store is not None
                    if len(ks) == 1:
                        store.data.narrow(0, a, b).copy_(vals[ks[0]])
                    else:
                        torch.cat([vals[k] for k in ks], out=store.data.narrow(0, a, len(ks) * b))

    def values(self, nodes: np.ndarray, ks: np.ndarray) -> list[torch.Tensor]:
        """The values of node outputs (after :meth:`run`), one gather per store."""
        stores = self.out_store[self.plan.kid[nodes], ks]
        out: list[Any] = [None] * len(nodes)
        for s in np.unique(stores).tolist():
            js = np.nonzero(stores == s)[0]
            store = self.stores[s]
            assert store is not None
            read = ((store, self._idx(self.out_row[nodes[js], ks[js]])),)
            if self.grad:
                deps = np.unique(self.step_of[nodes[js]]).tolist()
                toks = [t for t in (self.tokens[d] for d in deps) if t is not None]
                (g,) = _Gather.apply(read, *toks)
            else:
                g = store.data.index_select(0, read[0][1])
            for j, v in zip(js.tolist(), g.unbind(0)):
                out[j] = v
        return out


def _block(rows: np.ndarray) -> tuple[int, int] | None:
    """``rows`` as (first, count) when they are consecutive ascending rows
    of produced values (not the zeros of row 0), else None."""
    n = len(rows)
    first = int(rows[0])
    if first > 0 and int(rows[-1]) == first + n - 1 and (n < 3 or bool((np.diff(rows) == 1).all())):
        return first, n
    return None


class Caller:
    """Runs ``b`` calls of one kind at once, with the user's module or torch
    function: directly on the batch when the kind computes row by row, else
    directly with per-row losses when only a loss's reduction over the batch
    stands in the way (``cross_entropy(logits, label)`` of one row each:
    :class:`_RowLosses`), else
    under ``torch.func.vmap``, which batches any per-instance code, else
    (an op vmap has no batching rule for, such as ``aten::lstm_cell``) one
    call per row, concatenated. Which one is decided once per kind, on its
    first batch of two or more: the direct call must equal the reference
    (vmap, or the per-row loop where vmap fails) in shapes and values."""

    def __init__(self, kind: Kind, known: Known, params: dict[str, torch.Tensor], cells: dict[str, nn.Module]) -> None:
        from .._recording.tracer import Signature

        self.kind = kind
        self.known = known
        self.pos = kind.tensor_positions
        self.dpos = [p for p, leaf in enumerate(kind.leaves) if leaf[0] == "data"]
        fixed: list[Any] = [None] * len(kind.leaves)
        for i, leaf in enumerate(kind.leaves):
            if leaf[0] == "param":
                fixed[i] = params[leaf[1]]
        for i, v in known.statics.items():
            fixed[i] = v
        self.fixed = fixed
        self.dshape = {p: tuple(kind.leaves[p][1]) for p in self.dpos}
        # Direct calls see a leading batch dim of 1 as the batch's own dim.
        self.in_shape = [
            (-1,) + tuple(kind.leaves[p][1][1:]) if tuple(kind.leaves[p][1][:1]) == (1,) else None for p in self.pos
        ]
        self.data_shape = {
            p: None if tuple(kind.leaves[p][1][:1]) in ((1,), ()) else (-1,) + tuple(kind.leaves[p][1])
            for p in self.dpos
        }
        if kind.what == "cell":
            mod = cells[kind.key[1]]
            sig = Signature(mod.forward)
            names, spec = kind.arg_names, kind.arg_spec
            flat = spec == (tuple, None, (None,) * len(kind.leaves)) and names == sig.positional[: len(names)]

            def call(leaves: list) -> Any:
                if flat:  # plain positional tensors: no rebinding
                    return mod(*leaves)
                a, k = sig.call_args(names, tree_unflatten(leaves, spec))
                return mod(*a, **k)
        else:
            func, spec = kind.func, kind.arg_spec

            def call(leaves: list) -> Any:
                a, k = tree_unflatten(leaves, spec)
                return func(*a, **k)

        self._call = call
        self._vmapped = torch.func.vmap(self._flat)
        # A direct call of a cell that takes plain positional tensors and
        # nothing else: the module on the reshaped inputs, its tensors out
        # (the general path binds leaves and flattens what it returns).
        self._plain = (
            mod
            if kind.what == "cell" and flat and all(leaf[0] == "tensor" for leaf in kind.leaves) and not known.statics
            else None
        )

    def per(self, xs: list, ds: dict) -> list[torch.Tensor]:
        """The call on one instance's (or, directly, one batch's) tensors."""
        leaves = list(self.fixed)
        for p, x in zip(self.pos, xs):
            leaves[p] = x
        for p, v in ds.items():
            leaves[p] = v
        out, _ = tree_flatten(self._call(leaves))
        return out

    def _flat(self, *flat: torch.Tensor) -> tuple:
        n = len(self.pos)
        ds = {p: flat[n + i].reshape(self.dshape[p]) for i, p in enumerate(self.dpos)}
        return tuple(self.per(list(flat[:n]), ds))

    def vmap(self, ins: list, data: dict) -> list[torch.Tensor]:
        return list(self._vmapped(*ins, *[data[p] for p in self.dpos]))

    def direct(self, ins: list, data: dict, b: int) -> list[torch.Tensor]:
        xs = [x if s is None else x.reshape(s) for x, s in zip(ins, self.in_shape)]
        if self._plain is not None:
            out = self._plain(*xs)
            outs = list(out) if type(out) is tuple else [out]
            if all(isinstance(o, torch.Tensor) for o in outs):
                return [o if o.shape[1:] == s else o.reshape((b,) + s) for o, s in zip(outs, self.known.out_tshapes)]
        ds = {p: v if self.data_shape[p] is None else v.reshape(self.data_shape[p]) for p, v in data.items()}
        return [
            o if o.shape[1:] == s else o.reshape((b,) + s) for o, s in zip(self.per(xs, ds), self.known.out_tshapes)
        ]

    def loop(self, ins: list, data: dict, b: int) -> list[torch.Tensor]:
        rows = []
        for r in range(b):
            ds = {p: v[r].reshape(self.dshape[p]) for p, v in data.items()}
            rows.append(self.per([x[r] for x in ins], ds))
        return [torch.stack(col) for col in zip(*rows)]

    def __call__(self, ins: list, data: dict, b: int) -> list[torch.Tensor]:
        if b == 1:
            ds = {p: v[0].reshape(self.dshape[p]) for p, v in data.items()}
            return [o.unsqueeze(0) for o in self.per([x[0] for x in ins], ds)]
        known = self.known
        if known.mode is None:
            known.mode = self._decide(ins, data, b)
        if known.mode == "direct":
            return self.direct(ins, data, b)
        if known.mode == "rows":
            return self.rows(ins, data, b)
        if known.mode == "vmap":
            return self.vmap(ins, data)
        return self.loop(ins, data, b)

    def rows(self, ins: list, data: dict, b: int) -> list[torch.Tensor]:
        """The direct call with each batch-reducing loss made per row
        (:class:`_RowLosses`)."""
        with _RowLosses():
            return self.direct(ins, data, b)

    def _decide(self, ins: list, data: dict, b: int) -> str:
        """How the kind runs a batch: ``"direct"`` when its direct call on
        the batch equals the reference (shapes and values), else ``"rows"``
        when the direct call with per-row losses does, else ``"vmap"``, or
        ``"loop"`` when vmap cannot run it."""
        base = [x.detach() for x in ins]
        trials: list[list[torch.Tensor]] = []

        def fresh() -> list[torch.Tensor]:
            # Each trial gets its own copies: a cell that changes its inputs
            # in place must not change the next trial's, nor the real call's.
            trials.append([x.clone() for x in base])
            return trials[-1]

        def attempt(call: Callable[[list, dict, int], list[torch.Tensor]]) -> list[torch.Tensor] | None:
            try:
                return call(fresh(), data, b)
            except Exception:
                return None

        def same(got: list[torch.Tensor] | None) -> bool:
            return (
                got is not None
                and len(got) == len(ref)
                and all(g.shape == r.shape and torch.allclose(g, r, rtol=1e-4, atol=1e-6) for g, r in zip(got, ref))
            )

        with torch.no_grad(), warnings.catch_warnings():
            # vmap warns where it falls back to a loop (gru_cell): this call
            # only decides.
            warnings.simplefilter("ignore", UserWarning)
            try:
                ref, fallback = self.vmap(fresh(), data), "vmap"
            except Exception:
                ref, fallback = self.loop(fresh(), data, b), "loop"
            direct = attempt(self.direct)
            rows = None if same(direct) else attempt(self.rows)
        if any(not torch.equal(t, x) for trial in trials for t, x in zip(trial, base)):
            # The eager loop's later readers see the changed value, a batch's
            # see a copy: the two would differ, silently.
            what = f"module {self.kind.module}" if self.kind.what == "cell" else self.kind.base
            raise RecordError(
                f"{self.kind.frame}: {what} changes one of its input tensors in place; bt.run cannot reproduce "
                "that (write it out of place: x = x * 2, not x.mul_(2))"
            )
        if same(direct):
            return "direct"
        return "rows" if same(rows) else fallback


# Losses whose ``reduction`` reduces over the batch dim only (the class dim
# is reduced by the loss itself), so that per row they are ``"none"``.
_ROW_LOSSES = (F.cross_entropy, F.nll_loss)


class _RowLosses(TorchFunctionMode):
    """Inside a direct call on a batch of instances, each of one row: a
    ``cross_entropy`` or ``nll_loss`` that would reduce the batch (mean or
    sum) gives one value per row instead, which is what each instance's own
    call gives (the mean or sum of one value is that value; the mean of an
    ignored target is 0/0, NaN, as there). A weighted mean divides by the
    weights, so it is left alone (the kind then runs under vmap)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        red = kwargs.get("reduction", "mean")
        if func not in _ROW_LOSSES or red not in ("mean", "sum") or len(args) > 2 or kwargs.get("weight") is not None:
            return func(*args, **kwargs)
        out = func(*args, **{**kwargs, "reduction": "none"})
        target = args[1] if len(args) > 1 else kwargs.get("target")
        if red == "mean" and isinstance(target, torch.Tensor) and not target.is_floating_point():
            out = torch.where(target == kwargs.get("ignore_index", -100), torch.nan, out)
        return out


def callers(runner: Runner) -> Callable[[Kind], Caller]:
    """A cache of :class:`Caller` per kind for ``runner``."""
    made: dict[tuple, Caller] = {}
    params = dict(runner.model.named_parameters(remove_duplicate=False))

    def get(kind: Kind) -> Caller:
        c = made.get(kind.key)
        if c is None:
            c = made[kind.key] = Caller(kind, runner.known[base_key(kind.key)], params, runner.cells)
        return c

    return get
