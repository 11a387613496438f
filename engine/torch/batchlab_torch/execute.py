"""Executing a scheduled mini-batch with the user's own modules.

Every node output lives in a row of a store, one store per per-instance
shape and dtype (row 0 stays zeros: an absent input reads it). The
schedule is compiled once into :class:`Step` s, each with the index
tensors of the rows it reads and writes and the earlier steps it depends
on, so running a batch is: one gather of every argument, one call of the
cell (:class:`Caller`), one scatter of every output.

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
from .graph import Kind
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


Rows = tuple[tuple[_Store, torch.Tensor], ...]


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
    """Writes a step's outputs into their rows; returns a token whose
    backward hands the rows' accumulated gradients back to the step."""

    @staticmethod
    def forward(ctx: Any, writes: Rows, *values: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        for (s, i), v in zip(writes, values):
            s.data.index_copy_(0, i, v.detach())
        ctx.writes = writes
        return values[0].new_empty(0)

    @staticmethod
    def backward(ctx: Any, _token: torch.Tensor) -> Any:  # type: ignore[override]
        out: list[Any] = [None]
        for s, i in ctx.writes:
            if s.grad is None:
                out.append(torch.zeros((len(i),) + s.shape, dtype=s.data.dtype, device=s.data.device))
            else:
                out.append(s.grad.index_select(0, i))
        return tuple(out)


@dataclass
class Step:
    """One batch, compiled."""

    kind: Kind
    b: int
    reads: Rows
    data: dict[int, torch.Tensor]
    writes: Rows
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
        present = np.unique(plan.kid).tolist()
        width = max([len(kinds[q].out_tshapes) for q in present] + [1])
        out_store = np.full((len(kinds), width), -1, dtype=np.int64)
        self.out_row = np.zeros((plan.n, width), dtype=np.int64)
        index: dict[tuple, int] = {}
        counts: list[int] = []
        for q in present:
            ids = np.nonzero(plan.kid == q)[0]
            for k, key in enumerate(runner.out_keys(kinds[q])):
                s = index.get(key)
                if s is None:
                    s = index[key] = len(counts)
                    counts.append(0)
                out_store[q, k] = s
                self.out_row[ids, k] = counts[s] + 1 + np.arange(len(ids))
                counts[s] += len(ids)
        keys = sorted(index, key=index.get)  # type: ignore[arg-type]
        self.stores = [_Store(key[0], key[1], dev, counts[index[key]], runner.buffers) for key in keys]
        self.index = index
        self.out_store = out_store
        self.step_of = np.full(plan.n, -1, dtype=np.int64)
        for bi, ids in enumerate(batches):
            self.step_of[ids] = bi
        # Every argument's row and producing step at once (a step slices them).
        ok = plan.anode >= 0
        safe = np.where(ok, plan.anode, 0)
        self.arg_row = np.where(ok, self.out_row[safe, plan.ak], 0)
        self.arg_step = np.where(ok, self.step_of[safe], -1)
        self.steps = [self._compile(ids) for ids in batches]

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

    def _compile(self, ids: np.ndarray) -> Step:
        plan = self.plan
        q = int(plan.kid[ids[0]])
        kind = self.runner.kind_list[q]
        b = len(ids)
        reads = []
        producers = []
        seg = None
        if kind.what == "sum":
            starts, ends = plan.sptr[ids], plan.sptr[ids + 1]
            sel = np.concatenate([np.arange(s, e) for s, e in zip(starts.tolist(), ends.tolist())])
            rows, made = self._rows(plan.snode[sel], plan.sk[sel])
            reads.append((self._store_for(kind.leaves[0]), self._idx(rows)))
            producers.append(self.step_of[made])
            seg = self._idx(np.repeat(np.arange(b), ends - starts))
        else:
            pos = kind.tensor_positions
            if pos:
                rows = self.arg_row[ids, : len(pos)]
                for j, p in enumerate(pos):
                    reads.append((self._store_for(kind.leaves[p]), self._idx(rows[:, j])))
                producers.append(self.arg_step[ids, : len(pos)].ravel())
        data = {
            p: torch.from_numpy(plan.ints[ids, kind.data_slot[p]]).to(self.runner.device, _dtype(leaf[2]))
            for p, leaf in enumerate(kind.leaves)
            if leaf[0] == "data"
        }
        writes = tuple(
            (self.stores[int(self.out_store[q, k])], self._idx(self.out_row[ids, k]))
            for k in range(len(kind.out_tshapes))
        )
        deps: list[int] = []
        if self.grad and producers:
            deps = [d for d in np.unique(np.concatenate(producers)).tolist() if d >= 0]
        return Step(kind, b, tuple(reads), data, writes, deps, seg)

    def run(self) -> None:
        tokens: list[torch.Tensor | None] = [None] * len(self.steps)
        caller = self.runner.caller
        for bi, st in enumerate(self.steps):
            if self.grad:
                toks = [t for t in (tokens[d] for d in st.deps) if t is not None]
                ins = list(_Gather.apply(st.reads, *toks)) if st.reads else []
            else:
                ins = [s.data.index_select(0, i) for s, i in st.reads]
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
            vals = [o if o.shape[1:] == s.shape else o.reshape((st.b,) + s.shape) for o, (s, _) in zip(outs, st.writes)]
            if self.grad and any(v.requires_grad for v in vals):
                tokens[bi] = _Scatter.apply(st.writes, *vals)
            else:
                for (s, i), v in zip(st.writes, vals):
                    s.data.index_copy_(0, i, v.detach())
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
        ins = [x.detach() for x in ins]
        with torch.no_grad(), warnings.catch_warnings():
            # vmap warns where it falls back to a loop (gru_cell): this call
            # only decides, and a kind that falls back runs directly anyway.
            warnings.simplefilter("ignore", UserWarning)
            try:
                ref, fallback = self.vmap(ins, data), "vmap"
            except Exception:
                ref, fallback = self.loop(ins, data, b), "loop"
            try:
                got = self.direct(ins, data, b)
            except Exception:
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
