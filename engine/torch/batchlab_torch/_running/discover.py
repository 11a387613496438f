"""Discovering a mini-batch's graph without computing it.

The user's own forward runs on every sample with placeholders
(:class:`Value`) in place of the values cells compute, and of the model's
parameters (:class:`ParamValue`): a cell call records a node and returns
placeholders of its output shapes, without computing. It is the recorder's
:class:`~batchlab_torch._recording.tracer.Tracer` (the same kinds, specials
and names, so the nodes and their types are a recording's) with another
output, and with no ``TorchFunctionMode``: a torch call sees a placeholder
among its arguments and hands itself over (``__torch_function__``), while
everything else the forward does (``torch.tensor([word])``, the Python
around the calls) runs as it is, at its own cost.

A call of a kind seen before is not classified again: its arguments'
entries (shape and dtype per tensor, name per parameter, the integer of a
token id or label) are the key of the kind and of its output
placeholders, a few microseconds of Python (:meth:`Discovery._cell_call`,
:meth:`Discovery._free`). A kind's output shapes are learned once, by one
call on zeros, and kept in a :class:`Known` between mini-batches.

What is safe to skip, and what is not: a real float tensor reaching a node
is made outside every cell from no recorded value, so it is a constant of
the code; zeros are an absent input (its value is what batchlab's absent
input reads), anything else is refused as the recorder refuses it. A
parameter read between cells goes through its placeholder, so a value
derived from parameters outside every cell is seen and refused where a node
reads it. A forward that reads a placeholder's value (``.item()``, ``if
x > 0``) is refused: bt.run runs forwards whose control flow depends on the
sample's structure only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import _calls as calls
from .._flat import flatten as tree_flatten
from .._flat import unflatten as tree_unflatten
from .._recording.cell import bl_shape
from .._recording.graph import Graph, Kind, Kinds, RecordError, Src
from .._recording.tracer import ZERO, Derived, Stack, Tracer, _dts

# The discovery running now (bt.run runs one forward at a time per
# process): placeholders hand their torch calls to it.
_ACTIVE: Discovery | None = None


class Out:
    """What a placeholder of one shape and dtype carries, made once per
    shape and dtype (:func:`out_of`; compared by identity): its shapes,
    dtype and the kind entry of a tensor argument of its shape."""

    __slots__ = ("shape", "tshape", "dtype", "dts", "entry")

    def __init__(self, tshape: tuple[int, ...], dtype: torch.dtype) -> None:
        self.shape = torch.Size(tshape)
        self.tshape = tshape
        self.dtype = dtype
        self.dts = _dts(dtype)
        self.entry = ("tensor", tshape, self.dts)


_OUTS: dict[tuple, Out] = {}


def out_of(tshape: Sequence[int], dtype: torch.dtype) -> Out:
    """The shared :class:`Out` of a shape and dtype."""
    key = (tuple(tshape), dtype)
    o = _OUTS.get(key)
    if o is None:
        o = _OUTS[key] = Out(tuple(int(d) for d in tshape), dtype)
    return o


def _dispatch(func: Callable[..., Any], args: tuple, kwargs: dict | None) -> Any:
    d = _ACTIVE
    if d is None or not d._active:
        raise RecordError(f"{calls.user_frame()}: a bt.run placeholder reached {calls.name_of(func)} outside bt.run")
    return d._on_call(func, args, kwargs or {})


class _Placeholder:
    """What placeholders share: torch calls on them go to the discovery."""

    __slots__ = ()

    @classmethod
    def __torch_function__(
        cls, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        return _dispatch(func, args, kwargs)

    def _call(self, func: Callable[..., Any], args: tuple, kwargs: dict | None = None) -> Any:
        return _dispatch(func, args, kwargs)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]  # type: ignore[attr-defined]

    def dim(self) -> int:
        return len(self.shape)  # type: ignore[attr-defined]

    @property
    def ndim(self) -> int:
        return len(self.shape)  # type: ignore[attr-defined]

    def numel(self) -> int:
        return math.prod(self.shape)  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return self.shape[0]  # type: ignore[attr-defined]

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point  # type: ignore[attr-defined]

    @property
    def device(self) -> torch.device:
        d = _ACTIVE
        return d.device if d is not None else torch.device("cpu")

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

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
    # A comparison is a value read too (``if h.sum() > 0``, ``h == 0``): a
    # tensor compares element by element, so identity would silently lie.
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _value_read  # type: ignore[assignment]
    __hash__ = object.__hash__

    def __getattr__(self, name: str) -> Any:
        f = getattr(torch.Tensor, name, None)
        if f is None or not callable(f):
            raise AttributeError(name)
        return lambda *a, **k: _dispatch(f, (self,) + a, k)


def _dunder(func: Callable[..., Any], swap: bool = False) -> Callable[..., Any]:
    if swap:
        return lambda self, other: _dispatch(func, (other, self), None)
    return lambda self, *a: _dispatch(func, (self,) + a, None)


def _value_add(self: Any, other: Any) -> Any:
    """``a + b`` (and ``0 + a``: Python's ``sum``): the discovery's sum of two
    recorded values, or alias of a value and a zero, when it can say so at
    once; else the general way."""
    d = _ACTIVE
    if d is not None and d._depth and d._active and not d._in_cell:
        out = d._add2(self, other)
        if out is not None:
            return out
    return _dispatch(torch.Tensor.add, (self, other), None)


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
    setattr(_Placeholder, _name, _dunder(_func, _swap))
_Placeholder.__add__ = _Placeholder.__radd__ = _value_add  # type: ignore[method-assign,assignment]


def _value_getitem(self: Any, idx: Any) -> Any:
    """``stack[i]`` / ``cat[t : t + 1]`` (a row of a stack of recorded values)
    at once when the discovery can say so; else the general way."""
    d = _ACTIVE
    if d is not None and d._depth and d._active and not d._in_cell:
        out = d._get_row(self, idx)
        if out is not None:
            return out
    return _dispatch(torch.Tensor.__getitem__, (self, idx), None)


_Placeholder.__getitem__ = _value_getitem  # type: ignore[method-assign,assignment]


class Value(_Placeholder):
    """A placeholder for a value while :class:`Discovery` runs the user's
    forward: its shape and dtype (``o``) and its source: output ``k`` of
    node ``node``, or (``node`` < 0) ``other``, a :class:`Stack` of
    sources, a :class:`Derived`..., or nothing yet."""

    __slots__ = ("o", "node", "k", "other")

    def __init__(self, o: Out, node: int = -1, k: int = 0, other: Any = None) -> None:
        self.o = o
        self.node = node
        self.k = k
        self.other = other

    @property
    def src(self) -> Any:
        return Src(self.node, self.k) if self.node >= 0 else self.other

    @src.setter
    def src(self, s: Any) -> None:
        if type(s) is Src:
            self.node, self.k, self.other = s.node, s.k, None
        else:
            self.node, self.k, self.other = -1, 0, s

    @property
    def shape(self) -> torch.Size:
        return self.o.shape

    @property
    def tshape(self) -> tuple[int, ...]:
        return self.o.tshape

    @property
    def dtype(self) -> torch.dtype:
        return self.o.dtype

    @property
    def dts(self) -> str:
        return self.o.dts

    def __repr__(self) -> str:
        return f"Value(shape={list(self.o.tshape)}, src={self.src})"


class ParamValue(_Placeholder):
    """A model parameter while :class:`Discovery` runs: reading it in a
    torch call between cells is seen (an embedding lookup is a node; a
    value derived from it outside every cell is refused where a node reads
    it); its metadata is the parameter's."""

    __slots__ = ("param", "name", "entry")

    def __init__(self, param: nn.Parameter, name: str) -> None:
        self.param = param
        self.name = name
        self.entry = ("param", name)

    @property
    def shape(self) -> torch.Size:
        return self.param.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.param.dtype

    @property
    def device(self) -> torch.device:
        return self.param.device

    @property
    def data(self) -> torch.Tensor:
        return self.param.data

    def __repr__(self) -> str:
        return f"ParamValue({self.name}, shape={list(self.param.shape)})"


@dataclass
class Known:
    """What a Runner learned about a kind of call, kept between mini-batches."""

    out_tshapes: tuple[tuple[int, ...], ...]
    out_dtypes: tuple[torch.dtype, ...]
    out_spec: Any
    statics: dict[int, Any]
    mode: str | None = None  # "direct", "rows", "vmap" or "loop"; None: not decided yet

    def __post_init__(self) -> None:
        self.outs = tuple(out_of(s, d) for s, d in zip(self.out_tshapes, self.out_dtypes))


class _Fast:
    """A kind seen before, as its fast path needs it: its index, its
    outputs' placeholders, how they fold into what the call returns."""

    __slots__ = ("kind", "kid", "outs", "spec", "single", "flat", "pair")

    def __init__(self, kind: Kind, known: Known | None, outs: tuple[Out, ...] = ()) -> None:
        self.kind = kind
        self.kid = kind.index
        self.outs = known.outs if known is not None else outs
        self.spec = known.out_spec if known is not None else None
        self.single = self.spec is None
        self.flat = self.spec == (tuple, None, (None,) * len(self.outs))
        self.pair = self.flat and len(self.outs) == 2


def _zero_floats(x: torch.Tensor) -> bool:
    """Whether a float tensor is all zeros: through numpy on the CPU (a
    third of the cost of PyTorch's dispatch for a row), else by ``any``."""
    try:
        return np.count_nonzero(x.numpy()) == 0
    except (RuntimeError, TypeError):  # on a device, requiring grad, or a dtype numpy lacks
        with torch._C.DisableTorchFunction():
            return not bool(x.any())


class Discovery(Tracer):
    """Runs the user's forward with placeholders: builds the graph, computes
    nothing (a kind's output shapes are learned once, by one call on zeros).
    One per :class:`~batchlab_torch._running.runner.Runner`, a fresh graph
    per mini-batch (:meth:`begin`)."""

    keeps_values = False

    def __init__(
        self,
        model: nn.Module,
        cells: dict[str, nn.Module],
        known: dict[tuple, Known],
        device: torch.device,
        kinds: Kinds,
        name: str | None = None,
    ) -> None:
        super().__init__(model, cells, name=name)
        self.known = known
        self.device = device
        self.kinds = kinds
        self.graph = Graph(kinds)
        self._meta_cache: dict[tuple, Any] = {}
        self.placeholder = Value
        self.placeholders = (Value, ParamValue)
        # Every parameter's slot in its module, and its placeholder.
        self._slots: list[tuple[nn.Module, str, nn.Parameter, ParamValue]] = []
        for mname, mod in model.named_modules(remove_duplicate=False):
            for pname, p in list(mod._parameters.items()):
                if p is not None:
                    full = f"{mname}.{pname}" if mname else pname
                    self._slots.append((mod, pname, p, ParamValue(p, self.param_names.get(id(p), full))))
        for *_, pv in self._slots:
            self.param_names[id(pv)] = pv.name
        self._fast_cells: dict[str, dict[tuple, _Fast]] = {}  # per role
        self._fast_ops: dict[tuple, _Fast] = {}
        self._fast_sums: dict[Out, _Fast] = {}
        # Unmarked lookups whose forward is nn.Embedding's own (see _lookup_forward).
        marked = {id(m) for m in self.cells.values()}
        self._lookups = [
            m
            for m in model.modules()
            if type(m) is nn.Embedding and id(m) not in marked and "forward" not in m.__dict__
        ]
        self._seen_call: tuple | None = None
        self._swapped: list[tuple[nn.Module, type]] = []
        self._zeros: dict[int, tuple[torch.Tensor, bool]] = {}
        self._last_op: Kind | None = None

    # ------------------------------------------------------------ a mini-batch
    def begin(self) -> None:
        """An empty graph (the kinds and what is known about them stay)."""
        self.graph.clear()
        self.instances = 0
        self._zeros.clear()
        if len(self._meta_cache) > 4096:  # shapes are few; anything else is not worth keeping
            self._meta_cache.clear()

    def _start(self) -> None:
        global _ACTIVE
        if _ACTIVE is not None:
            raise RecordError("bt.run: a mini-batch is already being discovered (one at a time per process)")
        for mod, pname, _, pv in self._slots:
            mod._parameters[pname] = pv  # type: ignore[assignment]
        for mod in self._lookups:
            self._swap(mod, self._lookup_call(mod))
        _ACTIVE = self

    def _lookup_call(self, mod: nn.Embedding) -> Callable[..., Any]:
        """An unmarked ``nn.Embedding``'s ``__call__`` while the discovery
        runs: handed to the discovery as the call torch would hand over
        (``F.embedding`` of the input and the weight, the module's options
        as keywords) without torch's module and Python dispatch on the way,
        since a lookup per word is the commonest call between cells. The
        process's first lookup goes torch's way, noting how torch hands the
        call over; the shortcut is taken only where that is the same."""
        call_module = type(mod).__call__
        table: dict[tuple, _Fast] = {}  # a known lookup of one id, by its dtype and shape
        d = self

        def __call__(m: nn.Module, input: Any) -> Any:  # noqa: N807
            global _LOOKUP_DIRECT
            if d._in_cell or not d._active or _LOOKUP_DIRECT is False:
                return call_module(m, input)
            if _LOOKUP_DIRECT is None:
                d._seen_call = None
                out = call_module(m, input)
                _LOOKUP_DIRECT = d._seen_call == _LOOKUP_CALL
                return out
            one = type(input) is torch.Tensor and input.shape in _ONE and not input.dtype.is_floating_point
            if one and d._depth:
                fast = table.get((input.dtype, input.shape))
                if fast is not None:
                    g = d.graph
                    nid = len(g.kid)
                    g.kid.append(fast.kid)
                    g.inst.append(d._instance)
                    g.aptr.append(g.aptr[-1])
                    g.dval.append(int(input))
                    g.dptr.append(len(g.dval))
                    return Value(fast.outs[0], nid, 0)
            d._last_op = None
            out = self._on_call(
                _EMBEDDING,
                (input, mod.weight),
                {
                    "padding_idx": mod.padding_idx,
                    "max_norm": mod.max_norm,
                    "norm_type": mod.norm_type,
                    "scale_grad_by_freq": mod.scale_grad_by_freq,
                    "sparse": mod.sparse,
                },
            )
            kind = d._last_op
            if one and d._depth and kind is not None and type(out) is Value and out.node == len(d.graph.kid) - 1:
                known = d.known.get(kind.key)
                if known is not None and known.out_spec is None and not kind.tensor_positions:
                    table[(input.dtype, input.shape)] = _Fast(kind, known)
            return out

        return __call__

    def _stop(self) -> None:
        global _ACTIVE
        for mod, cls in reversed(self._swapped):
            mod.__class__ = cls
        self._swapped.clear()
        for mod, pname, p, _ in self._slots:
            mod._parameters[pname] = p
        if _ACTIVE is self:
            _ACTIVE = None

    def _swap(self, mod: nn.Module, call: Callable[..., Any]) -> None:
        """Gives ``mod`` (while the discovery runs) a class of its own whose
        ``__call__`` is ``call``: a call of a marked module costs no more
        than a Python call, without ``nn.Module.__call__``'s hooks machinery
        (nothing of the module runs during discovery; its batches run the
        module as it is)."""
        cls = type(mod)
        sub = type(cls.__name__, (cls,), {"__call__": call, "__module__": cls.__module__})
        self._swapped.append((mod, cls))
        mod.__class__ = sub

    def _hook_cell(self, role: str, mod: nn.Module) -> None:
        self._swap(mod, self._cell_call_fast(role, mod))

    def _cell_call_fast(self, role: str, mod: nn.Module) -> Callable[..., Any]:
        """The marked module's ``__call__`` while the discovery runs: a call
        of a known kind whose arguments are recorded values and integers
        adds its node at once (the general way is :meth:`_cell_call`)."""
        cls = type(mod)
        orig = cls.forward.__get__(mod)
        call_module = cls.__call__
        table = self._fast_cells.setdefault(role, {})
        d = self
        # The graph's lists, held for good (Graph.clear empties them in place).
        g = self.graph
        ginst, anode, dval = g.inst, g.anode, g.dval
        kid_append, ak_extend, aptr_append, dptr_append = g.kid.append, g.ak.extend, g.aptr.append, g.dptr.append

        def __call__(m: nn.Module, *args: Any, **kwargs: Any) -> Any:  # noqa: N807
            # The common call, inline: recorded values and integers as plain
            # positional arguments, a known kind. Anything else goes the
            # general way (_cell_call: nested arguments, zeros, a new kind,
            # another sample's value, which it refuses).
            if kwargs or d._in_cell or not d._active or not d._depth:
                if d._in_cell or not d._active:
                    return call_module(m, *args, **kwargs)
                return d._cell_call(role, m, orig, args, kwargs)
            key: list = []
            an = []
            ak = []
            ints = None
            leaves = args
            for x in args:
                t = type(x)
                if t is tuple or t is list:  # (h, c): the key holds the structure, as _cell_call's does
                    leaves, spec = tree_flatten(args)
                    key.append(spec)
                    break
            for x in leaves:
                t = type(x)
                if t is Value:
                    node = x.node
                    if node < 0:
                        return d._cell_call(role, m, orig, args, kwargs)
                    key.append(x.o)
                    an.append(node)
                    ak.append(x.k)
                elif t is torch.Tensor:
                    if x.dtype.is_floating_point:
                        if d.tag(x) is not ZERO:
                            return d._cell_call(role, m, orig, args, kwargs)
                        key.append(out_of(x.shape, x.dtype))
                        an.append(-1)
                        ak.append(0)
                    elif x.shape in _ONE:
                        key.append((x.dtype, x.shape))
                        if ints is None:
                            ints = [int(x)]
                        else:
                            ints.append(int(x))
                    else:
                        return d._cell_call(role, m, orig, args, kwargs)
                else:
                    return d._cell_call(role, m, orig, args, kwargs)
            fast = table.get(tuple(key))
            if fast is None:
                return d._cell_call(role, m, orig, args, kwargs)
            me = d._instance
            for a in an:
                if a >= 0 and ginst[a] != me:
                    return d._cell_call(role, m, orig, args, kwargs)
            nid = len(ginst)
            kid_append(fast.kid)
            ginst.append(me)
            anode.extend(an)
            ak_extend(ak)
            aptr_append(len(anode))
            if ints is not None:
                dval.extend(ints)
            dptr_append(len(dval))
            outs = fast.outs
            if fast.single:
                return Value(outs[0], nid, 0)
            if fast.pair:  # (h, c): the commonest cell output
                return (Value(outs[0], nid, 0), Value(outs[1], nid, 1))
            if fast.flat:
                return tuple([Value(o, nid, j) for j, o in enumerate(outs)])
            return tree_unflatten([Value(o, nid, j) for j, o in enumerate(outs)], fast.spec)

        return __call__

    @contextmanager
    def _real_parameters(self) -> Iterator[None]:
        """The real parameters in their modules (a call on zeros)."""
        for mod, pname, p, _ in self._slots:
            mod._parameters[pname] = p
        try:
            yield
        finally:
            for mod, pname, _, pv in self._slots:
                mod._parameters[pname] = pv  # type: ignore[assignment]

    # ------------------------------------------------------------ tags
    def tag(self, x: Any) -> Any:
        t = type(x)
        if t is Value:
            return x.src
        if t is ParamValue:
            return None
        if isinstance(x, torch.Tensor):
            own = super().tag(x)
            if own is not None:
                return own
            if x.is_floating_point() and self._is_zero(x):
                return ZERO
        return None

    def _is_zero(self, x: torch.Tensor) -> bool:
        """Whether a real float tensor is zeros (an absent input); tensors
        made once and passed often (``h = c = torch.zeros(...)``) are
        checked once."""
        hit = self._zeros.get(id(x))
        if hit is not None and hit[0] is x:
            return hit[1]
        z = _zero_floats(x)
        self._zeros[id(x)] = (x, z)
        return z

    def is_tensor(self, x: Any) -> bool:
        return isinstance(x, (torch.Tensor, _Placeholder))

    def _dummy(self, x: Any) -> Any:
        if type(x) is Value:
            return torch.zeros(x.o.tshape, dtype=x.o.dtype, device=self.device)
        if type(x) is ParamValue:
            return x.param
        return x

    # ------------------------------------------------------------ the fast paths
    # A call whose arguments are all of the plain sorts below takes a fast
    # path once its kind is known: its key is the arguments' entries as
    # they come (an Out per recorded value, a parameter's placeholder, the
    # dtype and shape of an integer, a Python constant), and a hit adds the
    # node and its output placeholders straight away. The first call of a
    # kind goes the general way (the recorder's classification), which
    # then registers the key.
    def _fast_key(self, leaves: Sequence[Any], *prefix: Any) -> tuple[tuple, list, list, list] | None:
        """The fast key of a call, its tensor positions' producers (node,
        output; ``-1`` for zeros) and its integers; None when an argument
        is of another sort (a stack, a derived value, a float tensor that
        is not zeros...)."""
        key = [*prefix]
        an: list[int] = []
        ak: list[int] = []
        ints: list[int] = []
        for x in leaves:
            t = type(x)
            if t is Value:
                if x.node < 0:
                    return None
                key.append(x.o)
                an.append(x.node)
                ak.append(x.k)
            elif t is ParamValue:
                key.append(x)
            elif t is torch.Tensor:
                if x.is_floating_point():
                    if self.tag(x) is not ZERO:
                        return None
                    key.append(out_of(x.shape, x.dtype))
                    an.append(-1)
                    ak.append(0)
                else:
                    if x.numel() != 1:
                        return None
                    key.append((x.dtype, x.shape))
                    ints.append(int(x))
            elif x is None or t is int or t is float or t is bool or t is str:
                key.append((t, x))
            else:
                return None
        return tuple(key), an, ak, ints

    def _node(self, fast: _Fast, an: list[int], ak: list[int], ints: list[int]) -> Any:
        """A node of a known kind; its output placeholders."""
        g = self.graph
        me = self._instance
        ginst = g.inst
        for a in an:
            if a >= 0 and ginst[a] != me:
                srcs = [Src(x, y) if x >= 0 else None for x, y in zip(an, ak)]
                self.instance_of(srcs, str(calls.here()), f"`{fast.kind.base}`")  # raises, naming the samples
        nid = len(g.kid)
        g.kid.append(fast.kid)
        ginst.append(me)
        g.anode.extend(an)
        g.ak.extend(ak)
        g.aptr.append(len(g.anode))
        if ints:
            g.dval.extend(ints)
        g.dptr.append(len(g.dval))
        outs = fast.outs
        if fast.single:
            return Value(outs[0], nid, 0)
        vals = [Value(o, nid, j) for j, o in enumerate(outs)]
        return tuple(vals) if fast.flat else tree_unflatten(vals, fast.spec)

    def _cell_call(self, role: str, mod: nn.Module, orig: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        got = None
        table = self._fast_cells.setdefault(role, {})
        if not kwargs and self._depth:
            if all(_leaf(a) for a in args):
                got = self._fast_key(args)
            else:
                leaves, spec = tree_flatten(args)
                got = self._fast_key(leaves, spec)
            if got is not None:
                fast = table.get(got[0])
                if fast is not None:
                    return self._node(fast, got[1], got[2], got[3])
        self._last_cell = None
        out = super()._cell_call(role, mod, orig, args, kwargs)
        kind = self._last_cell
        if got is not None and kind is not None:
            known = self.known.get(kind.key)
            if known is not None and not known.statics:
                table[got[0]] = _Fast(kind, known)
        return out

    def _free(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
        if func is _EMBEDDING and _LOOKUP_DIRECT is None:
            self._seen_call = (len(args), tuple(kwargs))
        fast_ok = _FAST_OPS.get(name)
        if fast_ok is None:
            fast_ok = _FAST_OPS[name] = _plain_op(name)
        got = None
        if not fast_ok and func in _STACKS and self._depth:
            # torch.cat along a feature dim of recorded values is an op.
            fast_ok = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) != 0
        if fast_ok and self._depth:
            spec = _op_spec(args, kwargs)
            if type(spec) is int:
                leaves = args
            elif spec[0] is not tuple:
                leaves = (*args, *kwargs.values())
            else:
                leaves, _ = tree_flatten((args, kwargs))
            got = self._fast_key(leaves, func, spec)
            if got is not None:
                fast = self._fast_ops.get(got[0])
                if fast is not None:
                    self._last_op = fast.kind
                    return self._node(fast, got[1], got[2], got[3])
        elif func in _ADDS and len(args) == 2 and not kwargs and self._depth:
            out = self._add2(args[0], args[1])
            if out is not None:
                return out
        elif func in _STACKS and self._depth:
            out = self._stack(func, args, kwargs)
            if out is not None:
                return out
        elif func in _REDUCERS and self._depth and args and type(args[0]) is Value and type(args[0].other) is Stack:
            out = self._reduce_stack(func, args, kwargs)
            if out is not None:
                return out
        elif func is _GETITEM and self._depth and len(args) == 2 and not kwargs:
            out = self._get_row(args[0], args[1])
            if out is not None:
                return out
        self._last_op = None
        out = super()._free(func, name, args, kwargs)
        kind = self._last_op
        if got is not None and kind is not None:
            known = self.known.get(kind.key)
            if known is not None:
                self._fast_ops[got[0]] = _Fast(kind, known)
        return out

    def _add2(self, a: Any, b: Any) -> Any:
        """``a + b`` of recorded values of one shape (Python's ``sum`` is a
        chain of them: a sum node, folded later) or of a value and a zero
        (the value), when the sum's kind is known; None otherwise (the
        general way, :meth:`Tracer._special`)."""
        ta, tb = type(a), type(b)
        if ta is not Value:
            if (ta is int or ta is float) and a == 0 and tb is Value and b.node >= 0:
                return Value(b.o, b.node, b.k)
            return None
        if a.node < 0:
            return None
        if tb is Value:
            if b.node < 0 or b.o is not a.o:
                return None
            fast = self._fast_sums.get(a.o)
            if fast is None:
                kind = self.kinds.get(("sum", a.o.tshape, a.o.dts))
                if kind is None or kind.index < 0:
                    return None
                fast = self._fast_sums[a.o] = _Fast(kind, None, (a.o,))
            return self._node(fast, [a.node, b.node], [a.k, b.k], [])
        if (tb is int or tb is float) and b == 0:
            return Value(a.o, a.node, a.k)
        return None

    def _stack(self, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """``torch.stack`` (or ``torch.cat`` of rows) along dim 0 of recorded
        values of one shape: a stack of their sources, as
        :meth:`Tracer._special` makes it, its shape worked out here; None
        for anything else (the general way)."""
        if not args or len(args) > 2 or (kwargs and set(kwargs) != {"dim"}):
            return None
        items = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        if dim != 0 or (type(items) is not list and type(items) is not tuple) or not items:
            return None
        o = items[0].o if type(items[0]) is Value else None
        if o is None:
            return None
        srcs = []
        for x in items:
            if type(x) is not Value or x.node < 0 or x.o is not o:
                return None
            srcs.append(Src(x.node, x.k))
        n = len(items)
        if func is torch.stack:
            shape, cat = (n, *o.tshape), False
        elif o.tshape[:1] == (1,):
            shape, cat = (n, *o.tshape[1:]), True
        else:
            return None
        return Value(out_of(shape, o.dtype), other=Stack(srcs, o.tshape, cat))

    def _reduce_stack(self, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """``stack.sum()`` / ``.sum(0)`` (``.mean``, ``keepdim``) of a stack of
        recorded values without zeros, when the sum's (or mean's) kind is
        known: its node at once, as :meth:`Tracer._special` and
        :meth:`Tracer._reduce` make it; None otherwise (the general way)."""
        x = args[0]
        st = x.other
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        if not (dim in (0, (0,), [0]) or (dim is None and bl_shape(st.item_tshape) == (1,))):
            return None
        if set(kwargs) - {"dim", "keepdim"} or len(args) > 3 or any(s is None for s in st.items):
            return None
        mean = func in _MEANS
        key = ("mean", len(st.items), st.item_tshape, x.o.dts) if mean else ("sum", st.item_tshape, x.o.dts)
        kind = self.kinds.get(key)
        if kind is None or kind.index < 0 or (mean and len(st.items) < 2):
            return None
        out = self._meta_out(func, args, kwargs)
        fast = _Fast(kind, None, (out_of(out.shape, out.dtype),))
        return self._node(fast, [s.node for s in st.items], [s.k for s in st.items], [])

    def _get_row(self, x: Any, idx: Any) -> Any:
        """``stack[i]`` or ``cat[t : t + 1]`` of a stack of recorded values:
        that row's value, as :meth:`Tracer._special` reads it; None for
        anything else."""
        if type(x) is not Value or type(x.other) is not Stack:
            return None
        st = x.other
        if type(idx) is slice and st.cat and idx.step in (None, 1):
            sel = range(len(st.items))[idx]
            if len(sel) != 1:
                return None
            i = sel[0]
        elif type(idx) is int and not st.cat:
            i = idx
        else:
            return None
        s = st.items[i]
        if s is None:
            return None
        return Value(out_of(st.item_tshape, x.o.dtype), s.node, s.k)

    def _row_results(
        self, func: Callable[..., Any], name: str, leaves: list, spec: Any, per: list[list | None], n: int
    ) -> list:
        """As the recorder's, but after the first row the rest take the op
        fast path by key (the rows' calls differ only in their rows)."""
        ra, rk = tree_unflatten([x if p is None else p[0] for x, p in zip(leaves, per)], spec)
        rows = [self._free(func, name, ra, rk)]
        row_ok = _FAST_OPS.get(name) or (func in _STACKS and rk.get("dim", ra[1] if len(ra) > 1 else 0) != 0)
        if n == 1 or not row_ok or not self._depth:
            return rows + super()._row_results(
                func, name, leaves, spec, [None if p is None else p[1:] for p in per], n - 1
            )
        got = self._fast_key([x if p is None else p[0] for x, p in zip(leaves, per)], func, _op_spec(ra, rk))
        fast = self._fast_ops.get(got[0]) if got is not None else None
        if fast is None or not fast.single:
            return rows + super()._row_results(
                func, name, leaves, spec, [None if p is None else p[1:] for p in per], n - 1
            )
        return rows + self._bulk_rows(fast, leaves, per, n)

    def _bulk_rows(self, fast: _Fast, leaves: list, per: list[list | None], n: int) -> list[Value]:
        """Rows 1..n-1 of a row-wise call whose first row made a node of the
        known kind ``fast``: every row has the first row's key (a stack's
        rows share their shape, an integer vector's rows theirs), so the
        nodes are added at once, a column of producers (or integers) per
        argument; returns each row's output placeholder."""
        tcols: list[tuple[list[int], list[int]]] = []
        dcols: list[list[int]] = []
        m = n - 1
        for x, p in zip(leaves, per):
            t = type(x)
            if p is None:
                if t is Value:
                    tcols.append(([x.node] * m, [x.k] * m))
                elif t is torch.Tensor:
                    if x.is_floating_point():
                        tcols.append(([-1] * m, [0] * m))
                    else:
                        dcols.append([int(x)] * m)
                continue
            rest = p[1:]
            r0 = p[0]
            if type(r0) is Value or r0.is_floating_point():
                tcols.append(
                    (
                        [r.node if type(r) is Value else -1 for r in rest],
                        [r.k if type(r) is Value else 0 for r in rest],
                    )
                )
            else:
                with torch._C.DisableTorchFunction():
                    dcols.append(torch.cat(rest).tolist() if rest else [])
        g = self.graph
        me = self._instance
        ginst = g.inst
        for nodes, _ in tcols:
            for a in nodes:
                if a >= 0 and ginst[a] != me:
                    self.instance_of([Src(a, 0)], str(calls.here()), f"`{fast.kind.base}`")  # raises
        first = len(g.kid)
        g.kid.extend([fast.kid] * m)
        ginst.extend([me] * m)
        w = len(tcols)
        if w:
            g.anode.extend(chain.from_iterable(zip(*[c[0] for c in tcols])))
            g.ak.extend(chain.from_iterable(zip(*[c[1] for c in tcols])))
        at = g.aptr[-1]
        g.aptr.extend(range(at + w, at + w * m + 1, w) if w else [at] * m)
        dw = len(dcols)
        if dw:
            g.dval.extend(chain.from_iterable(zip(*dcols)))
        at = g.dptr[-1]
        g.dptr.extend(range(at + dw, at + dw * m + 1, dw) if dw else [at] * m)
        o = fast.outs[0]
        return [Value(o, first + i, 0) for i in range(m)]

    def _rows(self, x: Any, n: int) -> list | None:
        if type(x) is Value:
            st = x.other
            if type(st) is not Stack:
                return None
            o = out_of(st.item_tshape, x.o.dtype)
            out: list = []
            for s in st.items:
                if s is None:
                    z = torch.zeros(st.item_tshape, dtype=x.o.dtype, device=self.device)
                    self.set_tag(z, ZERO)
                    out.append(z)
                else:
                    out.append(Value(o, s.node, s.k))
            return out
        return super()._rows(x, n)

    # ------------------------------------------------------------ subclass hooks
    def _learn(self, key: tuple, call: Callable[[], Any], leaves: list, frame: str, what: str) -> Known:
        """Runs a call once on zeros (placeholders replaced, the real
        parameters in place) to learn its output shapes."""
        self._active = False
        try:
            with torch.no_grad(), self._real_parameters():
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
        return [Value(o) for o in k.outs]

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
            kind = self.cell_kind(key, role, kinds, names, k.out_tshapes, k.out_spec, frame)
        self._last_cell = kind
        return self._placeholders(k), k.out_spec, kind

    _last_cell: Kind | None = None

    def _run_op(self, kind, key, func, name, args, kwargs, leaves, kinds, frame):  # type: ignore[no-untyped-def]
        k = self.known.get(key)
        if k is None:
            da, dk = tree_map(self._dummy, (args, kwargs))
            k = self._learn(key, lambda: func(*da, **dk), leaves, frame, name)
        if kind is None:
            kind = self.op_kind(key, func, name, kinds, k.out_tshapes, k.out_spec, frame)
        self._last_op = kind
        return self._placeholders(k), k.out_spec, kind

    def _meta(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
        """A metadata call on placeholders (``torch.numel(x)``): on meta
        tensors of their shapes."""
        leaves, spec = tree_flatten((args, kwargs))
        if not any(type(x) in self.placeholders for x in leaves):
            return func(*args, **kwargs)
        ma, mk = tree_unflatten([self._meta_tensor(x) for x in leaves], spec)
        self._active = False
        try:
            return func(*ma, **mk)
        finally:
            self._active = True

    def _meta_tensor(self, x: Any) -> Any:
        if type(x) is Value:
            return torch.empty(x.o.tshape, dtype=x.o.dtype, device="meta")
        if type(x) is ParamValue:
            return torch.empty(tuple(x.param.shape), dtype=x.param.dtype, device="meta")
        if isinstance(x, torch.Tensor):
            return torch.empty(tuple(x.shape), dtype=x.dtype, device="meta")
        return x

    def _unrecorded(self, func: Callable[..., Any], args: tuple, kwargs: dict, tag: Any) -> Any:
        """A call reading no recorded value: zeros are real zeros (an absent
        input), a value derived from parameters is a placeholder that
        remembers where (refused where a node reads it)."""
        out = self._meta_out(func, args, kwargs)
        if tag is ZERO:
            return _map_tensors(out, lambda t: self._real_zeros(t))
        if not isinstance(tag, Derived):
            tag = Derived(str(calls.here()))
        return _map_tensors(out, lambda t: Value(out_of(t.shape, t.dtype), other=tag))

    def _real_zeros(self, t: torch.Tensor) -> torch.Tensor:
        z = torch.zeros(tuple(t.shape), dtype=t.dtype, device=self.device)
        self.set_tag(z, ZERO)
        return z

    def _meta_out(self, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """The call's result as empty meta tensors of its shapes, cached by
        the arguments' shapes. Worked out by the call itself on zeros of the
        placeholders' shapes (the parameters and integers as they are): a
        small real call costs microseconds where PyTorch's meta kernels run
        Python decompositions (and imports) for many ops. A call that fails
        on zeros, or reads a boolean mask (its shape follows its values),
        runs on meta tensors."""
        leaves, spec = tree_flatten((args, kwargs))
        key = (func, spec, tuple(_sig(x) for x in leaves))
        hit = self._meta_cache.get(key)
        if hit is not None:
            return hit
        out = _stack_shape(func, args, kwargs, self.is_tensor)
        if out is None:
            self._active = False
            try:
                out = None
                if not any(isinstance(x, torch.Tensor) and x.dtype is torch.bool for x in leaves):
                    try:
                        with torch.no_grad():
                            za, zk = tree_unflatten([self._dummy(x) for x in leaves], spec)
                            out = _map_tensors(func(*za, **zk), _as_meta)
                    except Exception:
                        out = None
                if out is None:
                    ma, mk = tree_unflatten([self._meta_tensor(x) for x in leaves], spec)
                    out = func(*ma, **mk)
            finally:
                self._active = True
        self._meta_cache[key] = out
        return out

    def _value_like(self, t: torch.Tensor, src: Any = None) -> Value:
        v = Value(out_of(t.shape, t.dtype))
        v.src = src
        return v

    def _run_special(self, plan: tuple, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        what = plan[0]
        if what == "zero":
            return self._real_zeros(self._meta_out(func, args, kwargs))
        if what == "value" and calls.short(calls.name_of(func)) in ("add", "__add__", "__radd__"):
            a = args[0]
            return Value(a.o if type(a) is Value else out_of(a.shape, a.dtype))
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
            return tuple(self._real_zeros(t) if s is None else self._value_like(t, s) for t, s in zip(out, plan[1]))
        raise AssertionError(what)

    def _row_value(self, x: Any, i: int, t: Stack) -> Any:
        s = t.items[i]
        if s is None:
            z = torch.zeros(t.item_tshape, dtype=x.dtype, device=self.device)
            self.set_tag(z, ZERO)
            return z
        return Value(out_of(t.item_tshape, x.dtype), s.node, s.k)

    def _stacked(self, func: Callable[..., Any], args: tuple, kwargs: dict, rows: list, srcs: list[Src]) -> Any:
        r0 = rows[0]
        cat = tuple(r0.shape[:1]) == (1,)
        shape = ((len(rows) * r0.shape[0],) + tuple(r0.shape[1:])) if cat else (len(rows),) + tuple(r0.shape)
        return Value(out_of(shape, r0.dtype), other=Stack(list(srcs), tuple(r0.shape), cat))

    def _emit(self, nid: int, out_leaves: list, out_spec: Any, inputs: list) -> Any:
        for j, v in enumerate(out_leaves):
            v.node, v.k, v.other = nid, j, None
        return out_leaves[0] if out_spec is None else tree_unflatten(out_leaves, out_spec)


_EMBEDDING = torch.nn.functional.embedding
# Shapes of a tensor holding one integer (a token id or a label).
_ONE = frozenset({torch.Size([]), torch.Size([1]), torch.Size([1, 1])})
_LOOKUP_CALL = (2, ("padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"))
# Whether torch hands ``F.embedding`` over as ``_lookup_forward`` does
# (decided on the process's first lookup).
_LOOKUP_DIRECT: bool | None = None


# Per torch function name: whether a call of it can take the op fast path
# (it is never one of the calls that move recorded values: aliases, sums,
# stacks and their reads, products and divisions by constants, zeros,
# log_softmax; nor in place).
_FAST_OPS: dict[str, bool] = {}
_ADDS = frozenset({torch.Tensor.add, torch.Tensor.__add__, torch.Tensor.__radd__, torch.add})
_STACKS = frozenset({torch.stack, torch.cat, torch.concat})
_GETITEM = torch.Tensor.__getitem__
_MEANS = frozenset({torch.Tensor.mean, torch.mean})
_REDUCERS = frozenset({torch.Tensor.sum, torch.sum}) | _MEANS


def _op_spec(args: tuple, kwargs: dict) -> Any:
    """The structure part of an op call's fast key: the number of
    positional arguments when they are all leaves and there are no
    keywords; with the keywords' names when those are leaves too; else
    the flattening spec (a tuple whose first item is ``tuple``)."""
    if all(_leaf(a) for a in args):
        if not kwargs:
            return len(args)
        if all(_leaf(v) for v in kwargs.values()):
            return (len(args), *kwargs)
    return tree_flatten((args, kwargs))[1]


def _leaf(x: Any) -> bool:
    t = type(x)
    return t is not list and t is not tuple and t is not dict


_MOVERS = frozenset({"add", "__add__", "__radd__", "sum", "mean", "stack", "cat", "concat", "concatenate", "unbind"})


def _plain_op(name: str) -> bool:
    short = calls.short(name)
    return not (
        name in calls.ALIASES
        or name in calls.ZEROS
        or name in calls.CONSTANTS
        or short in _MOVERS
        or short in calls.DIVS
        or short in calls.MULS
        or short in ("log_softmax", "nll_loss", "__getitem__")
        or calls.is_inplace(name)
        or calls.is_meta(name)
    )


def _sig(x: Any) -> Any:
    """An argument as part of a cached shape computation's key."""
    t = type(x)
    if t is Value:
        return x.o
    if t is ParamValue:
        return x
    if isinstance(x, torch.Tensor):
        return (x.shape, x.dtype)
    if t is slice:
        return (slice, x.start, x.stop, x.step)
    if x is None or t in (int, float, bool, str):
        return (t, x)
    return (t, id(x))


def _as_meta(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(tuple(t.shape), dtype=t.dtype, device="meta")


def tree_map(f: Callable[[Any], Any], x: Any) -> Any:
    leaves, spec = tree_flatten(x)
    return tree_unflatten([f(v) for v in leaves], spec)


def _map_tensors(x: Any, f: Callable[[torch.Tensor], Any]) -> Any:
    if isinstance(x, torch.Tensor):
        return f(x)
    if isinstance(x, (tuple, list)):
        return type(x)(_map_tensors(i, f) for i in x)
    return x


def values_in(x: Any) -> list[Value]:
    """The placeholders among what a forward returned."""
    leaves, _ = tree_flatten(x)
    return [v for v in leaves if type(v) is Value]


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
