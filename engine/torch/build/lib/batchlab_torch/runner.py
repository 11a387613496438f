"""Running a mini-batch inside PyTorch by a batchlab schedule.

:func:`run` (or a :class:`Runner`, which keeps what it learns between
mini-batches) takes the user's model, its marked cells and a mini-batch of
samples, and

1. **discovers** the mini-batch's graph by running the user's own forward
   on every sample with placeholders (:class:`Value`): a cell call records
   a node and returns placeholders of its output shapes, without
   computing (:class:`Discovery`, the same :class:`~batchlab_torch.tracer.Tracer`
   the recorder is, so the nodes and their types are the recording's);
2. **schedules** it: ``"depth"``, ``"agenda"`` or any batchlab policy name,
   a policy file from ``search train``, both by batchlab's own policies in
   ``engine schedule --serve``; or a schedule file (``search optimise``,
   ``engine schedule --out``) of this very mini-batch;
3. **executes** the batches in order with the user's own modules: per
   batch, gather the inputs into one tensor per argument, call the cell
   once, scatter its outputs (:class:`Execution`). A cell that computes
   row by row is called directly on the batch; any other is run under
   ``torch.func.vmap``, which batches any per-instance code; which one is
   decided once per kind by comparing the two on the first batch.

Gathers and scatters move rows of one buffer per output shape; under
autograd they are custom functions whose backward adds into a gradient
buffer of the same rows, so a step costs what its batches cost, not a copy
of the buffer per batch. The returned values are what each ``model(sample)``
returned, with autograd through the batched graph.
"""

from __future__ import annotations

import atexit
import gc
import json
import math
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from . import calls
from .cell import bl_shape
from .flat import flatten as tree_flatten
from .flat import unflatten as tree_unflatten
from .graph import Kind, Node, RecordError, Src
from .tracer import ZERO, Stack, Tracer, _dts


class ScheduleError(Exception):
    """A schedule that cannot run this mini-batch, or no way to compute one."""


# ---------------------------------------------------------------- placeholders


class Value:
    """A placeholder for a recorded value while :class:`Discovery` runs the
    user's forward: its shape, dtype and source; torch calls on it go to the
    discovery."""

    __slots__ = ("shape", "tshape", "dtype", "dts", "src", "tracer")

    def __init__(self, shape: Sequence[int], dtype: torch.dtype, tracer: Discovery, src: Any = None) -> None:
        self.tshape = tuple(shape)
        self.shape = torch.Size(self.tshape)
        self.dtype = dtype
        self.dts = _dts(dtype)
        self.tracer = tracer
        self.src = src

    @classmethod
    def __torch_function__(
        cls, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        raise RecordError(f"{calls.user_frame()}: a bt.run placeholder reached {calls.name_of(func)} outside bt.run")

    def _call(self, func: Callable[..., Any], args: tuple, kwargs: dict | None = None) -> Any:
        return self.tracer._on_call(func, args, kwargs or {})

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def device(self) -> torch.device:
        return self.tracer.device

    @property
    def requires_grad(self) -> bool:
        return True

    @property
    def T(self) -> Any:  # noqa: N802
        return self._call(torch.Tensor.t, (self,))

    def _value_read(self, *a: Any, **k: Any) -> Any:
        raise RecordError(
            f"{calls.user_frame()}: bt.run: the forward reads a tensor's value between cells; bt.run runs forwards "
            "whose control flow depends only on the sample's structure (compute metrics from bt.run's outputs)"
        )

    item = tolist = numpy = __bool__ = __float__ = __int__ = __index__ = _value_read

    def __getattr__(self, name: str) -> Any:
        f = getattr(torch.Tensor, name, None)
        if f is None or not callable(f):
            raise AttributeError(name)
        return lambda *a, **k: self._call(f, (self,) + a, k)

    def __repr__(self) -> str:
        return f"Value(shape={list(self.shape)}, src={self.src})"


def _dunder(func: Callable[..., Any], swap: bool = False) -> Callable[..., Any]:
    if swap:
        return lambda self, other: self._call(func, (other, self))
    return lambda self, *a: self._call(func, (self,) + a)


for _name, _func, _swap in [
    ("__add__", torch.Tensor.add, False),
    ("__radd__", torch.Tensor.add, False),
    ("__sub__", torch.Tensor.sub, False),
    ("__rsub__", torch.Tensor.__rsub__, False),
    ("__mul__", torch.Tensor.mul, False),
    ("__rmul__", torch.Tensor.mul, False),
    ("__truediv__", torch.Tensor.div, False),
    ("__matmul__", torch.Tensor.matmul, False),
    ("__rmatmul__", torch.Tensor.matmul, True),
    ("__neg__", torch.Tensor.neg, False),
    ("__pow__", torch.Tensor.pow, False),
    ("__getitem__", torch.Tensor.__getitem__, False),
]:
    setattr(Value, _name, _dunder(_func, _swap))


# ---------------------------------------------------------------- discovery


@dataclass
class Known:
    """What a Runner learned about a kind of call, kept between mini-batches."""

    out_tshapes: tuple[tuple[int, ...], ...]
    out_dtypes: tuple[torch.dtype, ...]
    out_spec: Any
    statics: dict[int, Any]
    direct: bool | None = None  # None: not decided yet


class Discovery(Tracer):
    """Runs the user's forward with placeholders: builds the graph, computes
    nothing (a kind's output shapes are learned once, by one call on zeros)."""

    def __init__(
        self,
        model: nn.Module,
        cells: dict[str, nn.Module],
        known: dict[tuple, Known],
        device: torch.device,
        name: str | None = None,
    ) -> None:
        super().__init__(model, cells, name=name)
        self.known = known
        self.device = device
        self._meta_cache: dict[tuple, Any] = {}
        self.placeholder = Value

    def tag(self, x: Any) -> Any:
        if isinstance(x, Value):
            return x.src
        return super().tag(x)

    def is_tensor(self, x: Any) -> bool:
        return isinstance(x, (torch.Tensor, Value))

    def _dummy(self, x: Any) -> Any:
        if isinstance(x, Value):
            return torch.zeros(tuple(x.shape), dtype=x.dtype, device=self.device)
        return x

    def _learn(self, key: tuple, call: Callable[[], Any], leaves: list, frame: str, what: str) -> Known:
        """Runs a call once on zeros (placeholders replaced) to learn its
        output shapes."""
        self._active = False
        try:
            with torch.no_grad():
                out = call()
        except Exception as e:  # the user's code failed on zeros: say where
            raise RecordError(f"{frame}: {what} failed when bt.run called it on zeros to learn its shapes: {e}") from e
        finally:
            self._active = True
        out_leaves, out_spec = tree_flatten(out)
        if not out_leaves or not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in out_leaves):
            raise RecordError(f"{frame}: {what} returns other than float tensors")
        statics = {i: x for i, x in enumerate(leaves) if not self.is_tensor(x)}
        k = Known(tuple(tuple(t.shape) for t in out_leaves), tuple(t.dtype for t in out_leaves), out_spec, statics)
        self.known[key] = k
        return k

    def _placeholders(self, k: Known) -> list[Value]:
        return [Value(s, d, self) for s, d in zip(k.out_tshapes, k.out_dtypes)]

    def _run_cell(self, kind, key, role, mod, orig, args, kwargs, leaves, kinds, names, frame):  # type: ignore[no-untyped-def]
        k = self.known.get(key)
        if k is None:
            da, dk = tree_map(self._dummy, (args, kwargs))
            self._in_cell = True
            try:
                k = self._learn(key, lambda: orig(*da, **dk), leaves, frame, f"cell `{role}`")
            finally:
                self._in_cell = False
        if kind is None:
            kind = Kind(
                key=key,
                base=role,
                what="cell",
                leaves=tuple(kinds),
                names=tuple(names),
                out_tshapes=k.out_tshapes,
                frame=str(frame),
            )
            kind.out_spec = k.out_spec
        return self._placeholders(k), k.out_spec, kind

    def _run_op(self, kind, key, func, name, args, kwargs, leaves, kinds, frame):  # type: ignore[no-untyped-def]
        k = self.known.get(key)
        if k is None:
            da, dk = tree_map(self._dummy, (args, kwargs))
            k = self._learn(key, lambda: func(*da, **dk), leaves, frame, name)
        if kind is None:
            kind = Kind(
                key=key,
                base=self.op_base(name, kinds),
                what="op",
                leaves=tuple(kinds),
                names=tuple(f"a{i}" for i in range(len(leaves))),
                out_tshapes=k.out_tshapes,
                func=func,
                frame=str(frame),
            )
            kind.out_spec = k.out_spec
        return self._placeholders(k), k.out_spec, kind

    def _meta_out(self, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """The call's result on meta tensors (shapes only), cached by the
        arguments' shapes."""
        leaves, spec = tree_flatten((args, kwargs))
        sig = tuple(
            (tuple(x.shape), x.dtype)
            if self.is_tensor(x)
            else (type(x), x if isinstance(x, (int, float, bool, str, type(None))) else id(x))
            for x in leaves
        )
        key = (func, str(spec), sig)
        hit = self._meta_cache.get(key)
        if hit is not None:
            return hit
        meta = [torch.empty(tuple(x.shape), dtype=x.dtype, device="meta") if self.is_tensor(x) else x for x in leaves]
        ma, mk = tree_unflatten(meta, spec)
        self._active = False
        try:
            out = func(*ma, **mk)
        finally:
            self._active = True
        self._meta_cache[key] = out
        return out

    def _value_like(self, t: torch.Tensor, src: Any = None) -> Value:
        return Value(tuple(t.shape), t.dtype, self, src)

    def _run_special(self, plan: tuple, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        what = plan[0]
        if what == "zero" or (what == "unbind" and False):
            real = self._meta_out(func, args, kwargs)
            z = torch.zeros(tuple(real.shape), dtype=real.dtype, device=self.device)
            self.set_tag(z, ZERO)
            return z
        if what == "value" and calls.short(calls.name_of(func)) in ("add", "__add__", "__radd__"):
            return Value(tuple(args[0].shape), args[0].dtype, self)
        out = self._meta_out(func, args, kwargs)
        if what == "value":
            return self._value_like(out)
        if what == "alias":
            if bl_shape(out.shape) != bl_shape(tuple(args[0].shape)):
                raise RecordError(
                    f"{calls.user_frame()}: {calls.name_of(func)} changes a recorded value's shape between cells"
                )
            return self._value_like(out, plan[1])
        if what == "stack":
            return self._value_like(out, Stack(plan[1], plan[2]))
        if what == "unbind":
            res = []
            for t, s in zip(out, plan[1]):
                if s is None:
                    z = torch.zeros(tuple(t.shape), dtype=t.dtype, device=self.device)
                    self.set_tag(z, ZERO)
                    res.append(z)
                else:
                    res.append(self._value_like(t, s))
            return tuple(res)
        raise AssertionError(what)

    def _emit(self, nid: int, out_leaves: list, out_spec: Any, inputs: list) -> Any:
        node = self.graph.nodes[nid]
        node.outputs = [tuple(v.shape) for v in out_leaves]
        for j, v in enumerate(out_leaves):
            v.src = Src(nid, j)
        return out_leaves[0] if out_spec is None else tree_unflatten(out_leaves, out_spec)


# ---------------------------------------------------------------- fragments


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


# ---------------------------------------------------------------- execution


class _Store:
    """One buffer of rows of a per-instance shape and dtype: row 0 stays
    zeros (an absent input reads it), each node output owns one row."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, rows: int) -> None:
        self.shape = shape
        self.data = torch.zeros((rows + 1,) + shape, dtype=dtype, device=device)
        self.grad: torch.Tensor | None = None
        self.writer = np.zeros(rows + 1, dtype=np.int64)
        self.tokens: dict[int, torch.Tensor] = {}

    def grad_buffer(self) -> torch.Tensor:
        if self.grad is None:
            self.grad = torch.zeros_like(self.data)
        return self.grad


class _Scatter(torch.autograd.Function):
    """Writes a batch's output rows into a store; returns a token whose
    backward hands the rows' accumulated gradient back to the batch."""

    @staticmethod
    def forward(ctx: Any, value: torch.Tensor, store: _Store, rows: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        store.data.index_copy_(0, rows, value.detach())
        ctx.store, ctx.rows = store, rows
        return value.new_empty(0)

    @staticmethod
    def backward(ctx: Any, _token: torch.Tensor) -> Any:  # type: ignore[override]
        g = ctx.store.grad
        if g is None:
            shape = (len(ctx.rows),) + ctx.store.shape
            return torch.zeros(shape, dtype=ctx.store.data.dtype, device=ctx.store.data.device), None, None
        return g.index_select(0, ctx.rows), None, None


class _Gather(torch.autograd.Function):
    """Reads rows of a store (after the batches whose tokens it takes);
    its backward adds the rows' gradient into the store's gradient buffer."""

    @staticmethod
    def forward(ctx: Any, store: _Store, rows: torch.Tensor, *tokens: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.store, ctx.rows, ctx.tokens = store, rows, len(tokens)
        return store.data.index_select(0, rows)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:  # type: ignore[override]
        ctx.store.grad_buffer().index_add_(0, ctx.rows, g)
        empty = g.new_empty(0)
        return (None, None) + (empty,) * ctx.tokens


@dataclass
class Stats:
    """Where one :meth:`Runner.run` spent its time, in seconds, and what it ran."""

    discover: float = 0.0
    schedule: float = 0.0
    execute: float = 0.0
    nodes: int = 0
    batches: int = 0
    discovered: int = 0
    lower_bound: int | None = None
    misses: int = 0
    direct_kinds: int = 0
    vmap_kinds: int = 0
    per_type: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return self.discover + self.schedule + self.execute


class Execution:
    """One mini-batch's execution: its stores, rows and batches."""

    def __init__(self, runner: Runner, plan: Plan, grad: bool) -> None:
        self.runner = runner
        self.plan = plan
        self.grad = grad
        self.scatters = 0  # scatter calls so far: a store row's writer, for gathers' tokens
        dev = runner.device
        kinds = runner.kind_list
        width = max([len(kinds[q].out_tshapes) for q in np.unique(plan.kid).tolist()] + [1])
        self.out_store = np.full((len(kinds), width), -1, dtype=np.int64)
        self.out_row = np.zeros((plan.n, width), dtype=np.int64)
        self.stores: list[_Store] = []
        index: dict[tuple, int] = {}
        counts: dict[int, int] = {}
        present = np.unique(plan.kid).tolist()
        members = {q: np.nonzero(plan.kid == q)[0] for q in present}
        for q in present:
            kind = kinds[q]
            for k, key in enumerate(runner.out_keys(kind)):
                s = index.get(key)
                if s is None:
                    s = index[key] = len(self.stores)
                    self.stores.append(None)  # type: ignore[arg-type]
                    counts[s] = 0
                self.out_store[q, k] = s
                ids = members[q]
                self.out_row[ids, k] = counts[s] + 1 + np.arange(len(ids))
                counts[s] += len(ids)
        for key, s in index.items():
            self.stores[s] = _Store(key[0], key[1], dev, counts[s])
        self.index = index

    # ------------------------------------------------------------ moving rows
    def _idx(self, rows: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int64)).to(self.runner.device)

    def gather(self, store: _Store, rows: np.ndarray) -> torch.Tensor:
        idx = self._idx(rows)
        if not self.grad:
            return store.data.index_select(0, idx)
        w = np.unique(store.writer[rows]).tolist()
        tokens = [store.tokens[i] for i in w if i in store.tokens]
        return _Gather.apply(store, idx, *tokens)

    def scatter(self, value: torch.Tensor, store: _Store, rows: np.ndarray) -> None:
        idx = self._idx(rows)
        self.scatters += 1
        store.writer[rows] = self.scatters
        if not self.grad or not value.requires_grad:
            store.data.index_copy_(0, idx, value.detach())
            return
        store.tokens[self.scatters] = _Scatter.apply(value, store, idx)

    def _rows(self, nodes: np.ndarray, ks: np.ndarray) -> np.ndarray:
        ok = nodes >= 0
        safe = np.where(ok, nodes, 0)
        return np.where(ok, self.out_row[safe, ks], 0)

    def _in_store(self, kind: Kind, p: int) -> _Store:
        leaf = kind.leaves[p]
        key = (leaf[1], _dtype(leaf[2]))
        s = self.index.get(key)
        if s is None:  # only absent producers: a store of zeros
            s = self.index[key] = len(self.stores)
            self.stores.append(_Store(leaf[1], key[1], self.runner.device, 0))
        return self.stores[s]

    # ------------------------------------------------------------ batches
    def run_batch(self, ids: np.ndarray) -> None:
        plan = self.plan
        q = int(plan.kid[ids[0]])
        kind = self.runner.kind_list[q]
        b = len(ids)
        if kind.what == "sum":
            starts, ends = plan.sptr[ids], plan.sptr[ids + 1]
            counts = ends - starts
            sel = (
                np.concatenate([np.arange(s, e) for s, e in zip(starts.tolist(), ends.tolist())])
                if b
                else np.zeros(0, np.int64)
            )
            rows = self._rows(plan.snode[sel], plan.sk[sel])
            x = self.gather(self._in_store(kind, 0), rows)
            seg = self._idx(np.repeat(np.arange(b), counts))
            out = torch.zeros((b,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device).index_add(0, seg, x)
            outs = [out]
        else:
            pos = kind.tensor_positions
            ins = [
                self.gather(self._in_store(kind, p), self._rows(plan.anode[ids, j], plan.ak[ids, j]))
                for j, p in enumerate(pos)
            ]
            if kind.what == "mean":
                acc = ins[0]
                for x in ins[1:]:
                    acc = acc + x
                outs = [acc / len(ins)]
            else:
                data = {
                    p: torch.from_numpy(plan.ints[ids, kind.data_slot[p]]).to(self.runner.device, _dtype(leaf[2]))
                    for p, leaf in enumerate(kind.leaves)
                    if leaf[0] == "data"
                }
                outs = self.runner.call(kind, ins, data, b)
        for k, o in enumerate(outs):
            store = self.stores[int(self.out_store[q, k])]
            self.scatter(o.reshape((b,) + store.shape), store, self.out_row[ids, k])

    def values(self, nodes: np.ndarray, ks: np.ndarray) -> list[torch.Tensor]:
        """The values of node outputs, one gather per store."""
        plan = self.plan
        stores = self.out_store[plan.kid[nodes], ks]
        out: list[Any] = [None] * len(nodes)
        for s in np.unique(stores).tolist():
            js = np.nonzero(stores == s)[0]
            g = self.gather(self.stores[s], self.out_row[nodes[js], ks[js]])
            for r, j in enumerate(js.tolist()):
                out[j] = g[r]
        return out


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name.replace("torch.", ""))


def _base_key(key: tuple) -> tuple:
    """A loss twin's key without its ``loss`` mark (the call is the same)."""
    return key[:-1] if key and key[-1] == "loss" else key


# ---------------------------------------------------------------- schedules


def find_tool(name: str = "engine") -> str:
    """A batchlab binary (``engine``, ``search``, ``planner``):
    ``$BATCHLAB_<NAME>``, else ``target/release`` (then ``target/debug``) of
    the checkout this package or the working folder sits in, else ``PATH``."""
    var = f"BATCHLAB_{name.upper()}"
    env = os.environ.get(var)
    if env:
        if not os.path.isfile(env):
            raise ScheduleError(f"{var}={env}: no such file")
        return env
    for start in (os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        d = start
        while True:
            for sub in ("release", "debug"):
                p = os.path.join(d, "target", sub, name)
                if os.path.isfile(p) and os.access(p, os.X_OK):
                    return p
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    found = shutil.which(name)
    if found:
        return found
    raise ScheduleError(
        f"batchlab's `{name}` binary is needed here (batchlab's policies are not re-implemented in Python): "
        f"build it with `cargo build --release` in the batchlab checkout, or set {var}=/path/to/{name}"
    )


class _Server:
    """An ``engine schedule --serve --policy P`` process: one trace per
    line in, its batches per line out."""

    _all: dict[tuple[str, str], _Server] = {}
    _lock = threading.Lock()

    def __init__(self, engine: str, policy: str) -> None:
        self.proc = subprocess.Popen(
            [engine, "schedule", "--serve", "--policy", policy],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.policy = policy

    @classmethod
    def get(cls, engine: str, policy: str) -> _Server:
        with cls._lock:
            s = cls._all.get((engine, policy))
            if s is None or s.proc.poll() is not None:
                s = cls(engine, policy)
                cls._all[(engine, policy)] = s
            return s

    def ask(self, trace: str) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(trace + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr is not None else ""
            raise ScheduleError(f"engine schedule --serve --policy {self.policy} stopped: {err.strip()}")
        answer = json.loads(line)
        if "error" in answer:
            raise ScheduleError(f"engine schedule --policy {self.policy}: {answer['error']}")
        return answer

    @classmethod
    def close_all(cls) -> None:
        for s in cls._all.values():
            try:
                if s.proc.stdin is not None:
                    s.proc.stdin.close()
                s.proc.wait(timeout=5)
            except Exception:
                s.proc.kill()
        cls._all.clear()


atexit.register(_Server.close_all)


def graph_request(name: str, plan: Plan, kinds: list[Kind]) -> str:
    """The mini-batch's graph as ``engine schedule --serve`` takes it, one
    line: its types, and per node its type, instance and arguments (CSR)."""
    present, type_of = np.unique(plan.kid, return_inverse=True)
    is_sum = np.array([kinds[q].what == "sum" for q in present.tolist()], dtype=bool)[type_of]
    valid = plan.anode >= 0
    counts = np.where(is_sum, plan.sptr[1:] - plan.sptr[:-1], valid.sum(axis=1))
    ptr = np.concatenate([[0], np.cumsum(counts)])
    args = np.empty(int(ptr[-1]), dtype=np.int64)
    fixed = ~is_sum
    if fixed.any():
        rows = plan.anode[fixed]
        dst = np.repeat(ptr[:-1][fixed], valid[fixed].sum(axis=1)) + _ranks(valid[fixed])
        args[dst] = rows[valid[fixed]]
    if is_sum.any():
        idx = np.nonzero(is_sum)[0]
        lo, hi = plan.sptr[idx], plan.sptr[idx + 1]
        src = np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist())]) if len(idx) else lo
        dst = (
            np.concatenate([np.arange(a, b) for a, b in zip(ptr[idx].tolist(), ptr[idx + 1].tolist())])
            if len(idx)
            else lo
        )
        args[dst] = plan.snode[src]
    # str() of a list of ints is valid JSON and many times faster than json.dumps.
    types = json.dumps([kinds[q].type_name for q in present.tolist()])
    return (
        f'{{"workload":{json.dumps(name)},"types":{types},"type_of":{type_of.tolist()},'
        f'"arg_ptr":{ptr.tolist()},"args":{args.tolist()},"instance":{plan.instance.tolist()}}}'
    )


def _ranks(mask: np.ndarray) -> np.ndarray:
    """For each true entry of a 2-D mask, its rank among its row's true
    entries (row-major order)."""
    c = np.cumsum(mask, axis=1) - 1
    return c[mask]


def read_schedule(path: str, plan: Plan, kinds: list[Kind]) -> list[np.ndarray]:
    """A schedule file's batches, checked against this mini-batch's graph:
    node count, each batch one type, every node once after its arguments."""
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        raise ScheduleError(f"{path}: {e}") from None
    if not isinstance(s, dict) or s.get("format") != "batchlab-schedule":
        raise ScheduleError(f"{path}: not a schedule file (format batchlab-schedule)")
    if s.get("nodes") != plan.n:
        raise ScheduleError(
            f"{path}: a schedule of {s.get('nodes')} nodes, but this mini-batch has {plan.n}: a schedule file "
            "fits only the mini-batch it was made for (use a policy for new samples)"
        )
    batches = s.get("batch_nodes")
    types = s.get("schedule")
    if not isinstance(batches, list) or not isinstance(types, list) or len(batches) != len(types):
        raise ScheduleError(f"{path}: batch_nodes and schedule missing or of different lengths")
    done = np.zeros(plan.n, dtype=bool)
    out = []
    for b, (ids, ty) in enumerate(zip(batches, types)):
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
            raise ScheduleError(f"{path}: batch {b}: not a list of node ids")
        arr = np.array(ids, dtype=np.int64)
        if arr.min() < 0 or arr.max() >= plan.n or done[arr].any() or len(np.unique(arr)) != len(arr):
            raise ScheduleError(f"{path}: batch {b}: a node out of range or scheduled twice")
        for i in ids:
            if kinds[int(plan.kid[i])].type_name != ty:
                raise ScheduleError(f"{path}: batch {b}: node {i} is {kinds[int(plan.kid[i])].type_name}, not {ty}")
            deps = (
                plan.snode[plan.sptr[i] : plan.sptr[i + 1]]
                if kinds[int(plan.kid[i])].what == "sum"
                else plan.anode[i][plan.anode[i] >= 0]
            )
            if len(deps) and not done[deps].all():
                raise ScheduleError(f"{path}: batch {b}: node {i} runs before one of its arguments")
        done[arr] = True
        out.append(arr)
    if not done.all():
        raise ScheduleError(f"{path}: node {int(np.argmin(done))} is in no batch")
    return out


# ---------------------------------------------------------------- the runner


class Runner:
    """Runs mini-batches of ``model`` by batchlab schedules (see the module
    docs), remembering each kind's shapes and call mode, and each sample's
    graph (``cache=True``: a sample object seen again is not run again; its
    structure must not change), between them."""

    def __init__(
        self,
        model: nn.Module,
        cells: dict[str, nn.Module],
        *,
        name: str | None = None,
        engine: str | None = None,
        cache: bool = True,
    ) -> None:
        self.model = model
        self.cells = dict(cells)
        self.name = name
        self.engine = engine
        self.known: dict[tuple, Known] = {}
        self.kinds: dict[tuple, Kind] = {}
        self.kind_list: list[Kind] = []
        self._kid: dict[int, int] = {}
        self._type_names: dict[str, tuple] = {}
        self.cache: dict[int, tuple[Any, Fragment]] | None = {} if cache else None
        self.stats = Stats()
        try:
            self.device = next(model.parameters()).device
        except StopIteration:
            self.device = torch.device("cpu")

    # ------------------------------------------------------------ kinds
    def kind_id(self, kind: Kind) -> int:
        """The kind's index, registering (and naming) it on first sight."""
        q = self._kid.get(id(kind))
        if q is not None:
            return q
        name = f"{kind.base}[{kind.signature()}]"
        while self._type_names.get(name, kind.key) != kind.key:
            name = f"{kind.base}-{len(self._type_names)}[{kind.signature()}]"
        self._type_names[name] = kind.key
        kind.type_name = name
        data = [p for p, leaf in enumerate(kind.leaves) if leaf[0] == "data"]
        kind.data_slot = {p: i for i, p in enumerate(data)}
        q = self._kid[id(kind)] = len(self.kind_list)
        self.kind_list.append(kind)
        return q

    def out_keys(self, kind: Kind) -> list[tuple]:
        """Per output, the store it goes to: (per-instance shape, dtype)."""
        known = self.known.get(_base_key(kind.key))
        dts = known.out_dtypes if known is not None else (torch.float32,) * len(kind.out_tshapes)
        return [(tuple(s), d) for s, d in zip(kind.out_tshapes, dts)]

    # ------------------------------------------------------------ the steps
    def discover(self, samples: Sequence[Any]) -> list[Fragment]:
        """Each sample's fragment: from the cache, else by running the
        forward with placeholders (all new samples in one pass)."""
        frags: list[Fragment | None] = [None] * len(samples)
        todo = []
        for i, s in enumerate(samples):
            hit = self.cache.get(id(s)) if self.cache is not None else None
            if hit is not None and hit[0] is s:
                frags[i] = hit[1]
            else:
                todo.append(i)
        self.stats.discovered = len(todo)
        if todo:
            d = Discovery(self.model, self.cells, self.known, self.device, self.name)
            d.graph.kinds = d.kinds = self.kinds
            self.name = d.name
            returns = []
            collecting = gc.isenabled()
            gc.disable()  # discovery makes many small objects and no cycles
            try:
                with d:
                    for i in todo:
                        returns.append(self.model(samples[i]))
            finally:
                if collecting:
                    gc.enable()
            keep = {v.src.node for v in _values(returns) if isinstance(v.src, Src)}
            nodes = d.graph.finish(keep=keep, ports=False)
            renumber = d.graph.renumber
            by_inst: list[list[int]] = [[] for _ in todo]
            for gid, n in enumerate(nodes):
                if n.instance is None:
                    raise RecordError(f"{n.kind.frame}: bt.run: a node outside every sample's forward")
                by_inst[n.instance].append(gid)
            for j, i in enumerate(todo):
                local = {gid: li for li, gid in enumerate(by_inst[j])}
                for v in _values(returns[j]):
                    if isinstance(v.src, Src):
                        v.src = Src(local[renumber[v.src.node]], v.src.k)
                frag = Fragment([nodes[g] for g in by_inst[j]], local, self, returns[j])
                frags[i] = frag
                if self.cache is not None:
                    self.cache[id(samples[i])] = (samples[i], frag)
        return frags  # type: ignore[return-value]

    def schedule(self, plan: Plan, schedule: str) -> list[np.ndarray]:
        """The batches of ``schedule`` for the mini-batch."""
        if schedule.endswith(".json") and os.path.isfile(schedule):
            return read_schedule(schedule, plan, self.kind_list)
        engine = self.engine or find_tool("engine")
        answer = _Server.get(engine, schedule).ask(graph_request(self.name or "model", plan, self.kind_list))
        self.stats.lower_bound = answer.get("lower_bound")
        self.stats.misses = answer.get("misses", 0)
        return [np.array(b, dtype=np.int64) for b in answer["batches"]]

    def save_trace(self, samples: Iterable[Any], path: str) -> None:
        """Writes the mini-batch's graph as a trace file (what a schedule
        file must be made for: ``search optimise --trace PATH --out S.json``,
        then ``run(samples, schedule="S.json")``)."""
        samples = list(samples)
        plan = Plan(self.discover(samples))
        kinds = self.kind_list
        present: dict[int, int] = {}
        for q in plan.kid.tolist():
            present.setdefault(q, len(present))
        nodes = []
        for i, q in enumerate(plan.kid.tolist()):
            if kinds[q].what == "sum":
                args = plan.snode[plan.sptr[i] : plan.sptr[i + 1]].tolist()
            else:
                args = [a for a in plan.anode[i].tolist() if a >= 0]
            nodes.append({"type": present[q], "args": args, "instance": int(plan.instance[i])})
        body = {
            "format": "batchlab-trace",
            "version": 1,
            "workload": self.name,
            "meta": {"batch_size": len(samples), "level": "cell", "recorded_by": "batchlab_torch.Runner"},
            "types": [{"name": kinds[q].type_name, "batchable": True} for q in present],
            "nodes": nodes,
        }
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(body, f)
            f.write("\n")
        os.replace(tmp, path)

    def run(self, samples: Iterable[Any], schedule: str = "depth") -> list[Any]:
        """What ``[model(s) for s in samples]`` returns, computed by batches
        of ``schedule``; :attr:`stats` says where the time went."""
        samples = list(samples)
        self.stats = st = Stats()
        t0 = time.perf_counter()
        frags = self.discover(samples)
        plan = Plan(frags)
        t1 = time.perf_counter()
        batches = self.schedule(plan, schedule)
        t2 = time.perf_counter()
        ex = Execution(self, plan, torch.is_grad_enabled())
        for ids in batches:
            ex.run_batch(ids)
            ty = self.kind_list[int(plan.kid[ids[0]])].type_name
            st.per_type[ty] = st.per_type.get(ty, 0) + 1
        vals: list[Value] = []
        gnode, gk = [], []
        for f, off in zip(frags, plan.offsets.tolist()):
            for v in _values(f.ret):
                if isinstance(v.src, Src):
                    vals.append(v)
                    gnode.append(v.src.node + off)
                    gk.append(v.src.k)
        got = ex.values(np.array(gnode, dtype=np.int64), np.array(gk, dtype=np.int64)) if vals else []
        out = []
        pos = 0
        for f in frags:
            mine = [v for v in _values(f.ret) if isinstance(v.src, Src)]
            real = {id(v): got[pos + j] for j, v in enumerate(mine)}
            pos += len(mine)
            out.append(tree_map(lambda x, real=real: real.get(id(x), x) if isinstance(x, Value) else x, f.ret))
        t3 = time.perf_counter()
        st.discover, st.schedule, st.execute = t1 - t0, t2 - t1, t3 - t2
        st.nodes, st.batches = plan.n, len(batches)
        st.direct_kinds = sum(1 for k in self.known.values() if k.direct)
        st.vmap_kinds = sum(1 for k in self.known.values() if k.direct is False)
        for x in _values(out):
            raise RecordError(f"bt.run: a placeholder for {x} was returned but never computed")
        return out

    # ------------------------------------------------------------ calling a kind
    def call(self, kind: Kind, ins: list[torch.Tensor], data: dict[int, torch.Tensor], b: int) -> list[torch.Tensor]:
        """Runs ``b`` calls of ``kind`` at once: ``ins`` per tensor position
        ``[b, *shape]``, ``data`` per integer position ``[b]``. Returns the
        outputs ``[b, *shape]``."""
        known = self.known[_base_key(kind.key)]
        per = self._per_instance(kind, known)
        if b == 1:
            xs = [x[0] for x in ins]
            ds = {p: v[0].reshape(kind.leaves[p][1]) for p, v in data.items()}
            return [o.unsqueeze(0) for o in per(xs, ds)]
        if known.direct is None:
            known.direct = self._decide(kind, known, per, ins, data, b)
        if known.direct:
            return self._direct(kind, known, ins, data, b)
        return self._vmap(kind, known, per, ins, data)

    def _per_instance(self, kind: Kind, known: Known) -> Callable[[list, dict], list[torch.Tensor]]:
        """The call for one instance's tensors and integers."""
        leaves_kind = kind.leaves
        pos = kind.tensor_positions
        params = {i: self._param(leaf[1]) for i, leaf in enumerate(leaves_kind) if leaf[0] == "param"}
        statics = known.statics
        if kind.what == "cell":
            mod = self.cells[kind.key[1]]
            sig = _signature(mod)

            def call(args: tuple, kwargs: dict) -> Any:
                return mod(*args, **kwargs)

            def build(xs: list, ds: dict) -> tuple[tuple, dict]:
                leaves = _fill(len(leaves_kind), pos, xs, ds, params, statics)
                values = tree_unflatten(leaves, kind.arg_spec)
                return sig.call_args(kind.arg_names, values)
        else:
            func = kind.func

            def call(args: tuple, kwargs: dict) -> Any:
                return func(*args, **kwargs)

            def build(xs: list, ds: dict) -> tuple[tuple, dict]:
                leaves = _fill(len(leaves_kind), pos, xs, ds, params, statics)
                return tree_unflatten(leaves, kind.arg_spec)

        def per(xs: list, ds: dict) -> list[torch.Tensor]:
            a, k = build(xs, ds)
            out, _ = tree_flatten(call(a, k))
            return out

        return per

    def _param(self, name: str) -> torch.Tensor:
        return dict(self.model.named_parameters(remove_duplicate=False))[name]

    def _direct_inputs(self, kind: Kind, ins: list, data: dict) -> tuple[list, dict]:
        pos = kind.tensor_positions
        xs = [
            x.reshape((x.shape[0],) + kind.leaves[p][1][1:]) if kind.leaves[p][1][:1] == (1,) else x
            for x, p in zip(ins, pos)
        ]
        ds = {
            p: v if kind.leaves[p][1][:1] in ((1,), ()) else v.reshape((-1,) + kind.leaves[p][1])
            for p, v in data.items()
        }
        return xs, ds

    def _direct(self, kind: Kind, known: Known, ins: list, data: dict, b: int) -> list[torch.Tensor]:
        per = self._per_instance(kind, known)
        xs, ds = self._direct_inputs(kind, ins, data)
        outs = per(xs, ds)
        return [o.reshape((b,) + s) for o, s in zip(outs, known.out_tshapes)]

    def _vmap(
        self, kind: Kind, known: Known, per: Callable[[list, dict], list], ins: list, data: dict
    ) -> list[torch.Tensor]:
        dpos = sorted(data)

        def f(*flat: torch.Tensor) -> tuple:
            xs = list(flat[: len(ins)])
            ds = {p: flat[len(ins) + i].reshape(kind.leaves[p][1]) for i, p in enumerate(dpos)}
            return tuple(per(xs, ds))

        return list(torch.func.vmap(f)(*ins, *[data[p] for p in dpos]))

    def _decide(
        self, kind: Kind, known: Known, per: Callable[[list, dict], list], ins: list, data: dict, b: int
    ) -> bool:
        """Whether the cell computes row by row: its direct call on the
        batch equals the vmapped one (shapes and values)."""
        with torch.no_grad():
            ref = self._vmap(kind, known, per, [x.detach() for x in ins], data)
            try:
                xs, ds = self._direct_inputs(kind, [x.detach() for x in ins], data)
                got = per(xs, ds)
            except Exception:
                return False
        if len(got) != len(ref):
            return False
        for g, r, s in zip(got, ref, known.out_tshapes):
            if (
                g.numel() != r.numel()
                or tuple(g.shape)[:1] != (b,)
                and not (s[:1] == (1,) and tuple(g.shape)[:1] == (b,))
            ):
                return False
            if not torch.allclose(g.reshape(r.shape), r, rtol=1e-4, atol=1e-6):
                return False
        return True


def _fill(n: int, pos: list[int], xs: list, ds: dict, params: dict, statics: dict) -> list:
    leaves: list[Any] = [None] * n
    for p, x in zip(pos, xs):
        leaves[p] = x
    for p, v in ds.items():
        leaves[p] = v
    for p, v in params.items():
        leaves[p] = v
    for p, v in statics.items():
        leaves[p] = v
    return leaves


_SIGS: dict[int, Any] = {}


def _signature(mod: nn.Module) -> Any:
    from .tracer import Signature

    s = _SIGS.get(id(mod))
    if s is None:
        s = Signature(mod.forward)
        _SIGS[id(mod)] = s
    return s


def tree_map(f: Callable[[Any], Any], x: Any) -> Any:
    leaves, spec = tree_flatten(x)
    return tree_unflatten([f(v) for v in leaves], spec)


def _values(x: Any) -> list[Value]:
    leaves, _ = tree_flatten(x)
    return [v for v in leaves if isinstance(v, Value)]


_RUNNERS: dict[tuple[int, tuple], Runner] = {}


def run(
    model: nn.Module,
    samples: Iterable[Any],
    *,
    cells: dict[str, nn.Module],
    schedule: str = "depth",
    name: str | None = None,
) -> list[Any]:
    """``[model(s) for s in samples]``, computed by the batches of
    ``schedule``: ``"depth"``, ``"agenda"`` (or another batchlab policy
    name), a policy file ``P.yaml`` from ``search train``, or a schedule file
    ``S.json`` of this mini-batch. ``cells`` are the marked submodules, as
    for :class:`~batchlab_torch.Recorder`. The runner (and what it learned)
    is kept per model and cells; :func:`last_stats` tells where the time
    went."""
    key = (id(model), tuple(sorted((k, id(v)) for k, v in cells.items())))
    r = _RUNNERS.get(key)
    if r is None:
        r = Runner(model, cells, name=name)
        _RUNNERS[key] = r
    global _LAST
    out = r.run(samples, schedule)
    _LAST = r.stats
    return out


_LAST: Stats | None = None


def last_stats() -> Stats | None:
    """The :class:`Stats` of the last :func:`run`."""
    return _LAST
