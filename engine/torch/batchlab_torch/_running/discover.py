"""Discovering a mini-batch's graph without computing it: the user's own
forward runs on every sample with placeholders (:class:`Value`); a cell
call records a node and returns placeholders of its output shapes
(:class:`Discovery`, the same :class:`~batchlab_torch.tracer.Tracer` the
recorder is, so the nodes and their types are the recording's). A kind's
output shapes are learned once, by one real call on zeros, and kept in a
:class:`Known` between mini-batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .. import _calls as calls
from .._flat import flatten as tree_flatten
from .._flat import unflatten as tree_unflatten
from .._recording.cell import bl_shape
from .._recording.graph import Kind, RecordError, Src
from .._recording.tracer import ZERO, Stack, Tracer, _dts

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


@dataclass
class Known:
    """What a Runner learned about a kind of call, kept between mini-batches."""

    out_tshapes: tuple[tuple[int, ...], ...]
    out_dtypes: tuple[torch.dtype, ...]
    out_spec: Any
    statics: dict[int, Any]
    mode: str | None = None  # "direct", "rows", "vmap" or "loop"; None: not decided yet


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
        out = _stack_shape(func, args, kwargs, self.is_tensor)
        if out is None:
            meta = [
                torch.empty(tuple(x.shape), dtype=x.dtype, device="meta") if self.is_tensor(x) else x for x in leaves
            ]
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
        if what in ("row", "tag"):
            return self._value_like(out, plan[1])
        if what == "stack":
            return self._value_like(out, Stack(plan[1], plan[2], plan[3]))
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

    def _row_value(self, x: Any, i: int, t: Stack) -> Any:
        shape = t.item_tshape
        s = t.items[i]
        if s is None:
            z = torch.zeros(shape, dtype=x.dtype, device=self.device)
            self.set_tag(z, ZERO)
            return z
        return Value(shape, x.dtype, self, s)

    def _stacked(self, func: Callable[..., Any], args: tuple, kwargs: dict, rows: list, srcs: list[Src]) -> Any:
        cat = tuple(rows[0].shape[:1]) == (1,)
        shape = (
            ((len(rows) * rows[0].shape[0],) + tuple(rows[0].shape[1:])) if cat else (len(rows),) + tuple(rows[0].shape)
        )
        return Value(shape, rows[0].dtype, self, Stack(list(srcs), tuple(rows[0].shape), cat))

    def _emit(self, nid: int, out_leaves: list, out_spec: Any, inputs: list) -> Any:
        node = self.graph.nodes[nid]
        node.outputs = [tuple(v.shape) for v in out_leaves]
        for j, v in enumerate(out_leaves):
            v.src = Src(nid, j)
        return out_leaves[0] if out_spec is None else tree_unflatten(out_leaves, out_spec)


def tree_map(f: Callable[[Any], Any], x: Any) -> Any:
    leaves, spec = tree_flatten(x)
    return tree_unflatten([f(v) for v in leaves], spec)


def _values(x: Any) -> list[Value]:
    leaves, _ = tree_flatten(x)
    return [v for v in leaves if isinstance(v, Value)]


def _stack_shape(func: Callable[..., Any], args: tuple, kwargs: dict, is_tensor: Callable[[Any], bool]) -> Any:
    """``torch.stack`` of equal-shaped tensors as an empty meta tensor of its
    result's shape, worked out here: PyTorch's own meta ``stack`` loads
    ``torch._dynamo`` on first use, a second of start-up. None otherwise."""
    if func is not torch.stack or not args:
        return None
    items = list(args[0])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not items or not all(is_tensor(x) for x in items) or not isinstance(dim, int):
        return None
    shape = tuple(items[0].shape)
    if any(tuple(x.shape) != shape or x.dtype != items[0].dtype for x in items) or set(kwargs) - {"dim"}:
        return None
    if dim < 0:
        dim += len(shape) + 1
    if not 0 <= dim <= len(shape):
        return None
    return torch.empty(shape[:dim] + (len(items),) + shape[dim:], dtype=items[0].dtype, device="meta")
