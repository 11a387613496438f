"""Executing a scheduled mini-batch with the user's own modules.

Every node output lives in a row of a store, one store per per-instance
shape and dtype (row 0 stays zeros: an absent input reads it). Rows are
handed out in schedule order, so a batch writes each output into one
contiguous block. The schedule is compiled once into :class:`Step` s,
each with the index tensors of the rows it reads, the blocks it writes and
the earlier steps it depends on, so running a batch is: one gather of
every argument (a view, without autograd, where the rows are one block),
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
from torch import nn

from .discover import Known
from .flat import flatten as tree_flatten
from .flat import unflatten as tree_unflatten
from .graph import Kind, RecordError
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


Rows = tuple[tuple[_Store, torch.Tensor | None], ...]  # None: read in place as a block (no autograd)
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


@dataclass
class Step:
    """One batch, compiled."""

    kind: Kind
    b: int
    reads: Rows
    blocks: list[tuple[int, int] | None]  # per read, its rows as one block (first, count), if they are
    data: dict[int, torch.Tensor]
    writes: Blocks
    deps: list[int]
    seg: torch.Tensor | None = None  # a sum's segment per read row


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name.replace("torch.", ""))


def base_key(key: tuple) -> tuple:
    """A loss twin's key without its ``loss`` mark (the call is the same)."""
    return key[:-1] if key and key[-1] == "loss" else key


class Execution:
    """A mini-batch's stores and compiled steps, run in schedule order."""

    def __init__(self, runner: Runner, plan: Plan, batches: list[np.ndarray], grad: bool) -> None:
        self.runner = runner
        self.plan = plan
        self.grad = grad
        dev = runner.device
        kinds = runner.kind_list
        present = sorted(plan.present.tolist())
        width = max([len(kinds[q].out_tshapes) for q in present] + [1])
        out_store = np.full((len(kinds), width), -1, dtype=np.int64)
        self.out_row = np.zeros((plan.n, width), dtype=np.int64)
        index: dict[tuple, int] = {}
        for q in present:
            for k, key in enumerate(runner.out_keys(kinds[q])):
                out_store[q, k] = index.setdefault(key, len(index))
        # Rows in schedule order: each batch's outputs are one block per
        # output (its first row in ``first``).
        sizes = np.array([len(ids) for ids in batches], dtype=np.int64)
        start = np.concatenate([[0], np.cumsum(sizes)])
        order = np.concatenate(batches)
        counts = [0] * len(index)
        self.first: list[list[int]] = []
        for q, b in zip(plan.kid[order[start[:-1]]].tolist(), sizes.tolist()):
            firsts = []
            for k in range(len(kinds[q].out_tshapes)):
                st = int(out_store[q, k])
                firsts.append(counts[st] + 1)
                counts[st] += b
            self.first.append(firsts)
        rank = np.arange(plan.n) - np.repeat(start[:-1], sizes)
        for k in range(width):
            first_k = np.array([f[k] if k < len(f) else 0 for f in self.first], dtype=np.int64)
            has = np.repeat(first_k > 0, sizes)
            self.out_row[order[has], k] = (np.repeat(first_k, sizes) + rank)[has]
        keys = sorted(index, key=index.get)  # type: ignore[arg-type]
        self.stores = [_Store(key[0], key[1], dev, counts[index[key]], runner.buffers) for key in keys]
        self.index = index
        self.out_store = out_store
        self.step_of = np.full(plan.n, -1, dtype=np.int64)
        self.step_of[order] = np.repeat(np.arange(len(batches)), sizes)
        # Every argument's row and producing step at once, nodes in schedule
        # order and one contiguous line per argument position: a step's
        # index tensors are slices of these.
        self.start = start.tolist()
        anode, ak = plan.anode[order], plan.ak[order]
        ok = anode >= 0
        safe = np.where(ok, anode, 0)
        self.arg_row = np.ascontiguousarray(np.where(ok, self.out_row[safe, ak], 0).T)
        # Which step made each argument: what a backward orders by.
        self.arg_step = np.where(ok, self.step_of[safe], -1) if grad else None
        # Per argument position and batch: whether the batch reads that
        # argument's rows as one block of produced rows (ascending by one,
        # not the zeros of row 0), for all batches at once.
        lo, last = start[:-1], start[1:] - 1
        ar = self.arg_row
        runs = np.zeros((ar.shape[0], ar.shape[1]), dtype=np.int64)
        np.cumsum(np.diff(ar, axis=1) == 1, axis=1, out=runs[:, 1:])
        self.arg_block = (runs[:, last] - runs[:, lo] == last - lo) & (ar[:, lo] > 0)
        # Index tensors made once per mini-batch: a batch's are views of a
        # contiguous slice (per argument position; per integer column).
        self.arg_row_t = torch.from_numpy(self.arg_row).to(dev)
        self.ints_t = torch.from_numpy(np.ascontiguousarray(plan.ints[order].T)).to(dev)
        self._per_kind: dict[int, tuple[list[_Store], list[tuple[int, int, torch.dtype]]]] = {}
        self.steps = [self._compile(bi, ids) for bi, ids in enumerate(batches)]

    def _idx(self, rows: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int64))
        return t if self.runner.device.type == "cpu" else t.to(self.runner.device)

    def _store_for(self, leaf: tuple) -> _Store:
        key = (tuple(leaf[1]), _dtype(leaf[2]))
        s = self.index.get(key)
        if s is None:  # only absent producers: a store of zeros
            s = self.index[key] = len(self.stores)
            self.stores.append(_Store(key[0], key[1], self.runner.device, 0))
        return self.stores[s]

    def _rows(self, nodes: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok = nodes >= 0
        safe = np.where(ok, nodes, 0)
        return np.where(ok, self.out_row[safe, ks], 0), nodes[ok]

    def _kind(self, q: int) -> tuple[list[_Store], list[tuple[int, int, torch.dtype]]]:
        """Kind ``q``'s stores per tensor position and (position, column,
        dtype) per integer input, looked up once per mini-batch."""
        got = self._per_kind.get(q)
        if got is None:
            kind = self.runner.kind_list[q]
            stores = [self._store_for(kind.leaves[p]) for p in kind.tensor_positions]
            data = [(p, kind.data_slot[p], _dtype(leaf[2])) for p, leaf in enumerate(kind.leaves) if leaf[0] == "data"]
            got = self._per_kind[q] = (stores, data)
        return got

    def _compile(self, bi: int, ids: np.ndarray) -> Step:
        plan = self.plan
        q = int(plan.kid[ids[0]])
        kind = self.runner.kind_list[q]
        b = len(ids)
        lo, hi = self.start[bi], self.start[bi + 1]
        reads = []
        blocks: list[tuple[int, int] | None] = []
        producers = []
        seg = None
        stores, data_cols = self._kind(q)
        # Without autograd, a kind whose call mode is known reads a block in
        # place (see run): its rows need no index tensor.
        known = self.runner.known.get(base_key(kind.key))
        in_place = not self.grad and (kind.what == "mean" or (known is not None and known.mode is not None))
        if kind.what == "sum":
            starts, ends = plan.sptr[ids], plan.sptr[ids + 1]
            lens = ends - starts
            # Every producer slot of the batch's sums, in node order, at once.
            sel = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
            rows, made = self._rows(plan.snode[sel], plan.sk[sel])
            reads.append((self._store_for(kind.leaves[0]), self._idx(rows)))
            blocks.append(_block(rows))
            producers.append(self.step_of[made])
            seg = self._idx(np.repeat(np.arange(b), ends - starts))
        else:
            for j, st in enumerate(stores):
                blk = (int(self.arg_row[j, lo]), b) if self.arg_block[j, bi] else None
                reads.append((st, None if in_place and blk is not None else self.arg_row_t[j, lo:hi]))
                blocks.append(blk)
            if stores and self.grad:
                assert self.arg_step is not None
                producers.append(self.arg_step[lo:hi, : len(stores)].ravel())
        data = {p: self.ints_t[col, lo:hi].to(dt) for p, col, dt in data_cols}
        writes = tuple((self.stores[int(self.out_store[q, k])], a, b) for k, a in enumerate(self.first[bi]))
        deps: list[int] = []
        if self.grad and producers:
            deps = [d for d in np.unique(np.concatenate(producers)).tolist() if d >= 0]
        return Step(kind, b, tuple(reads), blocks, data, writes, deps, seg)

    def run(self) -> None:
        tokens: list[torch.Tensor | None] = [None] * len(self.steps)
        caller = self.runner.caller
        for bi, st in enumerate(self.steps):
            if self.grad:
                toks = [t for t in (tokens[d] for d in st.deps) if t is not None]
                ins = list(_Gather.apply(st.reads, *toks)) if st.reads else []
            else:
                # A block is read in place (nothing writes it again in this
                # mini-batch) by a kind checked not to change its inputs.
                kind = st.kind
                views = kind.what in ("sum", "mean") or caller(kind).known.mode is not None
                ins = [
                    s.data.narrow(0, blk[0], blk[1]) if views and blk is not None else s.data.index_select(0, i)
                    for (s, i), blk in zip(st.reads, st.blocks)
                ]
            kind = st.kind
            if kind.what == "sum":
                x = ins[0]
                outs = [
                    torch.zeros((st.b,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device).index_add(0, st.seg, x)
                ]
            elif kind.what == "mean":
                acc = ins[0]
                for x in ins[1:]:
                    acc = acc + x
                outs = [acc / len(ins)]
            else:
                outs = caller(kind)(ins, st.data, st.b)
            vals = [
                o if o.shape[1:] == s.shape else o.reshape((st.b,) + s.shape) for o, (s, _, _) in zip(outs, st.writes)
            ]
            if self.grad and any(v.requires_grad for v in vals):
                tokens[bi] = _Scatter.apply(st.writes, *vals)
            else:
                for (s, a, n), v in zip(st.writes, vals):
                    s.data.narrow(0, a, n).copy_(v.detach())
        self.tokens = tokens

    def values(self, nodes: np.ndarray, ks: np.ndarray) -> list[torch.Tensor]:
        """The values of node outputs (after :meth:`run`), one gather per store."""
        stores = self.out_store[self.plan.kid[nodes], ks]
        out: list[Any] = [None] * len(nodes)
        for s in np.unique(stores).tolist():
            js = np.nonzero(stores == s)[0]
            read = ((self.stores[s], self._idx(self.out_row[nodes[js], ks[js]])),)
            if self.grad:
                deps = np.unique(self.step_of[nodes[js]]).tolist()
                toks = [t for t in (self.tokens[d] for d in deps) if t is not None]
                (g,) = _Gather.apply(read, *toks)
            else:
                g = read[0][0].data.index_select(0, read[0][1])
            for r, j in enumerate(js.tolist()):
                out[j] = g[r]
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
    under ``torch.func.vmap``, which batches any per-instance code, else
    (an op vmap has no batching rule for, such as ``aten::lstm_cell``) one
    call per row, concatenated. Which one is decided once per kind, on its
    first batch of two or more: the direct call must equal the reference
    (vmap, or the per-row loop where vmap fails) in shapes and values."""

    def __init__(self, kind: Kind, known: Known, params: dict[str, torch.Tensor], cells: dict[str, nn.Module]) -> None:
        from .tracer import Signature

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
        if known.mode == "vmap":
            return self.vmap(ins, data)
        return self.loop(ins, data, b)

    def _decide(self, ins: list, data: dict, b: int) -> str:
        """How the kind runs a batch: ``"direct"`` when its direct call on
        the batch equals the reference (shapes and values), else ``"vmap"``,
        or ``"loop"`` when vmap cannot run it."""
        base = [x.detach() for x in ins]
        trials: list[list[torch.Tensor]] = []

        def fresh() -> list[torch.Tensor]:
            # Each trial gets its own copies: a cell that changes its inputs
            # in place must not change the next trial's, nor the real call's.
            trials.append([x.clone() for x in base])
            return trials[-1]

        with torch.no_grad(), warnings.catch_warnings():
            # vmap warns where it falls back to a loop (gru_cell): this call
            # only decides.
            warnings.simplefilter("ignore", UserWarning)
            try:
                ref, fallback = self.vmap(fresh(), data), "vmap"
            except Exception:
                ref, fallback = self.loop(fresh(), data, b), "loop"
            try:
                got = self.direct(fresh(), data, b)
            except Exception:
                got = None
        if any(not torch.equal(t, x) for trial in trials for t, x in zip(trial, base)):
            # The eager loop's later readers see the changed value, a batch's
            # see a copy: the two would differ, silently.
            what = f"module {self.kind.module}" if self.kind.what == "cell" else self.kind.base
            raise RecordError(
                f"{self.kind.frame}: {what} changes one of its input tensors in place; bt.run cannot reproduce "
                "that (write it out of place: x = x * 2, not x.mul_(2))"
            )
        if got is None:
            return fallback
        same = len(got) == len(ref) and all(
            g.shape == r.shape and torch.allclose(g, r, rtol=1e-4, atol=1e-6) for g, r in zip(got, ref)
        )
        return "direct" if same else fallback


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
