"""Lowering a recorded ``torch.fx`` graph to a batchlab cell.

The recorder writes what one call of a cell did as a ``torch.fx.Graph``:
placeholders for its tensor inputs, ``get_attr`` for the parameters it read,
one ``call_function`` per torch call with the torch function as target,
its output shape in ``meta["tshape"]`` and the user's source line in
``meta["frame"]``. :func:`lower` walks that graph with one rule per torch
function (``RULES``) and emits batchlab's ops (``docs/cells.md``); a call
without a rule, or one whose arguments the op set cannot express, is a
:class:`LoweringError` naming the module, the torch function and the line.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from .. import _calls as calls
from .._calls import ALIASES, INTEGER_ALIASES, ZEROS, name_of
from .cell import Cell, Shape, Val, bl_dim, bl_shape


class LoweringError(Exception):
    """A call the op set cannot express; the message names the module, the
    torch function and the user's source line."""


@dataclass(frozen=True)
class Zero:
    """A tensor of zeros made inside the cell (``torch.zeros``)."""

    tshape: tuple[int, ...]


@dataclass(frozen=True)
class ParamT:
    """The transpose of a parameter (``W.t()``), read by a product."""

    param: Val


@dataclass(frozen=True)
class LogSoftmax:
    """``log_softmax(x)``, waiting for the ``nll_loss`` that makes it a
    ``pick_loss``; ``node`` is the call, named if anything else reads it."""

    of: Val
    node: fx.Node


@dataclass(frozen=True)
class Stacked:
    """``torch.stack(values)`` (or ``torch.cat`` of rows along their leading
    dim of 1), waiting for the sum, mean or index that reads it."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class DataIn:
    """An integer input: the node's token id (read by an embedding) or its
    label (read by a loss)."""

    position: int


@dataclass(frozen=True)
class Scalar:
    """A Python number argument."""

    value: float


class Lowerer:
    """State of one lowering: the cell being built, the value of every fx
    node, which integer inputs became token ids and labels, and which fx
    node each cell value came from (for the probe check)."""

    def __init__(self, cell: Cell, where: str) -> None:
        self.cell = cell
        self.where = where
        self.env: dict[fx.Node, Any] = {}
        self.data_use: dict[int, str] = {}
        self.origin: dict[str, fx.Node] = {}
        self.node: fx.Node | None = None
        # Parameters read as matrices (weights, tables), and parameters of a
        # leading dim of 1 read as vectors, declared at their batchlab shape.
        self.matrices: set[str] = set()
        self.vectors: set[str] = set()

    # ----- helpers used by the rules
    def fail(self, reason: str, at: fx.Node | None = None) -> LoweringError:
        """The error for the call ``at`` (default: the one being lowered)."""
        n = at if at is not None else self.node
        if n is not None and n.op == "output":
            # The return statement is no torch call: it has no line on the tape.
            return LoweringError(f"{self.where}: the value it returns: {reason}")
        fn = name_of(n.target) if n is not None and callable(n.target) else "?"
        frame = n.meta.get("frame", "?") if n is not None else "?"
        return LoweringError(f"{self.where}: {fn} at {frame}: {reason}")

    def matrix(self, w: Val) -> Val:
        """``w``, a parameter, read as a matrix (a weight or a table)."""
        if w.name in self.vectors:
            raise self.fail(f"parameter {w.name} is read both as a vector and as a matrix")
        self.matrices.add(w.name)
        return w

    def val(self, x: Any, what: str = "argument") -> Val:
        if isinstance(x, Val):
            if x.kind == "param" and len(x.shape) > 1 and x.shape[0] == 1:
                # A parameter such as a learned start state `[1, H]` read as
                # a value: its batchlab shape, as every value's (the weights
                # file keeps PyTorch's `[1, H]`; a leading 1 is the same data).
                if x.name in self.matrices:
                    raise self.fail(f"parameter {x.name} is read both as a matrix and as a vector")
                x.shape = bl_shape(x.shape)
                self.vectors.add(x.name)
            return x
        if isinstance(x, Zero):
            raise self.fail(f"{what} is a tensor of zeros made inside the cell; pass it in, or drop the term")
        if isinstance(x, ParamT):
            raise self.fail(
                f"{what} is a transposed weight; batchlab reads weights only in products (x @ W.t(), F.linear)"
            )
        if isinstance(x, LogSoftmax):
            raise self.fail(
                f"its result is read as the {what}; batchlab has no log_softmax op: log_softmax is supported only "
                "as the input of nll_loss (a pick_loss), or use F.cross_entropy",
                at=x.node,
            )
        if isinstance(x, Stacked):
            if len(x.items) == 1:  # a stack of one value is that value (a leading dim of 1 more)
                return self.val(x.items[0], what)
            raise self.fail(
                f"{what} is a stack of {len(x.items)} rows; batchlab reads a stack only through sum(0), mean(0), an "
                "index or a row-wise call (linear, sigmoid, tanh, relu, + - *): a softmax over the rows or a "
                "product with the stack (dot-product attention) has no batchlab op"
            )
        if isinstance(x, DataIn):
            raise self.fail(
                f"{what} is an integer tensor; batchlab reads integers only as embedding ids and loss targets"
            )
        if isinstance(x, Scalar):
            raise self.fail(f"{what} is the constant {x.value!r}; batchlab's ops take tensors here")
        raise self.fail(f"{what} of type {type(x).__name__} is not a tensor")

    def out_tshape(self, i: int | None = None) -> tuple[int, ...]:
        assert self.node is not None
        s = self.node.meta["tshape"]
        return tuple(s[i] if i is not None else s)

    def emit(self, op: str, args: list[Val], shape: Shape, **kw: float) -> Val:
        assert self.node is not None
        v = self.cell.emit(op, args, shape, self.node.name, self.node.meta.get("frame", ""), **kw)
        return v

    def slice_(self, x: Val, start: int, length: int) -> Val:
        if start == 0 and length == x.shape[0]:
            return x
        if length <= 0 or start < 0 or start + length > x.shape[0]:
            raise self.fail(f"slice {start}..{start + length} of a dim of {x.shape[0]}")
        return self.emit("slice", [x], (length,) + x.shape[1:], start=start, len=length)

    def check_shape(self, v: Any, tshape: Sequence[int]) -> Any:
        if isinstance(v, Val) and v.shape != bl_shape(tshape):
            raise self.fail(
                f"batchlab computes shape {list(v.shape)} here but torch made {list(tshape)} "
                f"(batchlab shape {list(bl_shape(tshape))}): the call broadcasts or works across the batch dims"
            )
        return v


def _scalar(x: Any) -> float | None:
    if isinstance(x, Scalar):
        return x.value
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    return None


def _binary(lw: Lowerer, a: Any, b: Any, op: str) -> Any:
    sa, sb = _scalar(a), _scalar(b)
    if op == "add":
        if sb == 0.0 or isinstance(b, Zero):
            return a
        if sa == 0.0 or isinstance(a, Zero):
            return b
    if op == "sub":
        if sb == 0.0 or isinstance(b, Zero):
            return a
    if op == "mul":
        if isinstance(a, Zero) or isinstance(b, Zero) or sa == 0.0 or sb == 0.0:
            return Zero(lw.out_tshape())
        if sb == 1.0:
            return a
        if sa == 1.0:
            return b
    if sa is not None or sb is not None:
        raise lw.fail(
            f"{op} with the constant {sa if sa is not None else sb!r}; batchlab's elementwise ops take two tensors "
            "(1 - x is one_minus; x + 0, x * 1 are dropped)"
        )
    va, vb = lw.val(a, "left operand"), lw.val(b, "right operand")
    if va.shape != vb.shape:
        raise lw.fail(f"{op} of shapes {list(va.shape)} and {list(vb.shape)}: batchlab does not broadcast")
    return lw.emit(op, [va, vb], va.shape)


def _arg(args: tuple, kwargs: dict, i: int, name: str, default: Any = None) -> Any:
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _tshape_of(lw: Lowerer, n: Any) -> tuple[int, ...]:
    if isinstance(n, fx.Node):
        s = n.meta.get("tshape")
        if isinstance(s, tuple) and all(isinstance(d, int) for d in s):
            return s
    raise lw.fail("an argument without a recorded shape")


Rule = Callable[[Lowerer, tuple, dict, tuple, dict], Any]
RULES: dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    def deco(f: Rule) -> Rule:
        for n in names:
            RULES[n] = f
        return f

    return deco


# Each rule gets the lowerer, the arguments as lowered values (vargs,
# vkwargs) and as fx nodes (raw args, for shapes), and returns the value.


@rule("torch.nn.functional.linear")
def _linear(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x, w, b = _arg(a, k, 0, "input"), _arg(a, k, 1, "weight"), _arg(a, k, 2, "bias")
    if isinstance(x, Zero):  # W 0 + b
        return Zero(lw.out_tshape()) if b is None else lw.val(b, "bias")
    x = lw.val(x, "input")
    if isinstance(w, Val) and w.kind == "param":
        lw.matrix(w)
    if not (isinstance(w, Val) and w.kind == "param" and len(w.shape) == 2):
        raise lw.fail("the weight of a linear must be a parameter of two dims")
    if len(x.shape) != 1 or x.shape[0] != w.shape[1]:
        raise lw.fail(
            f"linear of an input of batchlab shape {list(x.shape)}; batchlab multiplies a weight with a vector"
        )
    if b is None:
        return lw.emit("matmul", [w, x], (w.shape[0],))
    b = lw.val(b, "bias")
    return lw.emit("affine", [b, w, x], (w.shape[0],))


@rule("torch.Tensor.add", "torch.add", "torch.Tensor.__radd__", "torch.Tensor.__add__")
def _add(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    if k.get("alpha", 1) != 1:
        raise lw.fail("add with alpha")
    return _binary(lw, a[0], _arg(a, k, 1, "other"), "add")


@rule("torch.Tensor.sub", "torch.sub", "torch.Tensor.__sub__")
def _sub(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    if k.get("alpha", 1) != 1:
        raise lw.fail("sub with alpha")
    return _binary(lw, a[0], _arg(a, k, 1, "other"), "sub")


@rule("torch.Tensor.__rsub__", "torch.rsub")
def _rsub(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x, other = a[0], _arg(a, k, 1, "other")
    if _scalar(other) == 1.0:
        v = lw.val(x)
        return lw.emit("one_minus", [v], v.shape)
    return _binary(lw, other, x, "sub")


def _terms(lw: Lowerer, v: Any) -> list[Val]:
    """The values a sum or a chain of adds in this cell made ``v`` from
    (``[v]`` when it is not one)."""
    if not isinstance(v, Val) or v.kind != "op":
        return [v]
    made = next((op for op in reversed(lw.cell.ops) if op.out is v), None)
    if made is None or made.op not in ("add", "sum"):
        return [v]
    out: list[Val] = []
    for x in made.args:
        out += _terms(lw, x)
    return out


def _scaled(lw: Lowerer, x: Any, factor: float) -> Any:
    """``x * factor``: the mean of the k values a sum of k values added when
    ``factor`` is 1/k (``(a + b) / 2``), else a ``scale`` by ``factor``."""
    if factor == 1.0:
        return x
    if isinstance(x, Zero) or factor == 0.0:
        return Zero(lw.out_tshape())
    if not bool(torch.tensor(factor, dtype=torch.float32).isfinite()):
        raise lw.fail(f"scaling by {factor!r}; batchlab's scale takes a finite (f32) constant")
    terms = _terms(lw, x)
    if len(terms) >= 2 and abs(factor * len(terms) - 1.0) < 1e-9:
        return lw.emit("mean", terms, terms[0].shape)
    v = lw.val(x)
    return lw.emit("scale", [v], v.shape, factor=factor)


@rule("torch.Tensor.mul", "torch.mul", "torch.Tensor.__mul__", "torch.Tensor.__rmul__", "torch.multiply")
def _mul(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x, y = a[0], _arg(a, k, 1, "other")
    sx, sy = _scalar(x), _scalar(y)
    if sy is not None and sy not in (0.0, 1.0) and sx is None:
        return _scaled(lw, x, sy)
    if sx is not None and sx not in (0.0, 1.0) and sy is None:
        return _scaled(lw, y, sx)
    return _binary(lw, x, y, "mul")


@rule("torch.Tensor.div", "torch.div", "torch.Tensor.__truediv__", "torch.true_divide")
def _div(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    d = _scalar(_arg(a, k, 1, "other"))
    if d is None or k.get("rounding_mode") is not None:
        raise lw.fail("division by other than a constant; batchlab's ops do not divide")
    if d == 0.0:
        raise lw.fail("division by the constant 0; batchlab's scale takes a finite factor")
    return _scaled(lw, a[0], 1.0 / d)


@rule("torch.neg", "torch.negative", "torch.Tensor.neg", "torch.Tensor.negative", "torch.Tensor.__neg__")
def _neg(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    return _scaled(lw, a[0], -1.0)


def _unary(op: str) -> Rule:
    def f(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
        if k.get("inplace"):
            raise lw.fail("in place")
        if isinstance(a[0], Zero) and op in ("tanh", "relu"):
            return Zero(lw.out_tshape())
        v = lw.val(a[0])
        return lw.emit(op, [v], v.shape)

    return f


rule("torch.sigmoid", "torch.Tensor.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit")(_unary("sigmoid"))
rule("torch.tanh", "torch.Tensor.tanh", "torch.nn.functional.tanh")(_unary("tanh"))
rule("torch.relu", "torch.Tensor.relu", "torch.nn.functional.relu")(_unary("relu"))
rule("torch.exp", "torch.Tensor.exp")(_unary("exp"))


@rule("torch.nn.functional.gelu")
def _gelu(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    approximate = a[1] if len(a) > 1 else k.get("approximate", "none")
    if approximate != "none":
        raise lw.fail(f"gelu with approximate={approximate!r}; batchlab's gelu is the exact (erf) form")
    v = lw.val(a[0])
    return lw.emit("gelu", [v], v.shape)


@rule("torch.nn.functional.layer_norm")
def _layer_norm(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    v = lw.val(a[0])
    shape = _arg(a, k, 1, "normalized_shape")
    shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    if len(v.shape) != 1 or tuple(int(d) for d in shape) != v.shape:
        raise lw.fail("layer_norm over other than the whole vector; batchlab normalises a vector [n]")
    eps = _scalar(_arg(a, k, 4, "eps", 1e-5))
    if eps is None or abs(eps - 1e-5) > 1e-12:
        raise lw.fail(f"layer_norm with eps={eps}; batchlab's layer_norm has PyTorch's default, 1e-5")
    y = lw.emit("layer_norm", [v], v.shape)
    w, b = _arg(a, k, 2, "weight"), _arg(a, k, 3, "bias")
    if w is not None:
        y = lw.emit("mul", [y, lw.val(w, "weight")], v.shape)
    if b is not None:
        y = lw.emit("add", [y, lw.val(b, "bias")], v.shape)
    return y


@rule("torch.nn.functional.softmax", "torch.softmax", "torch.Tensor.softmax")
def _softmax(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    v = lw.val(a[0])
    dim = _arg(a, k, 1, "dim")
    if dim is None or len(v.shape) != 1 or bl_dim(_tshape_of(lw, ra[0]), dim) != 0:
        raise lw.fail("softmax over other than the one dim of a vector")
    return lw.emit("softmax", [v], v.shape)


@rule("torch.cat", "torch.concat", "torch.concatenate")
def _cat(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    items, dim = list(a[0]), _arg(a, k, 1, "dim", 0)
    raw = list(ra[0])
    vals = [lw.val(x, f"tensor {i} of the list") for i, x in enumerate(items)]
    shapes = [_tshape_of(lw, r) for r in raw]
    if len(set(shapes)) == 1 and len(shapes[0]) >= 2 and shapes[0][0] == 1 and dim % len(shapes[0]) == 0:
        # torch.cat(rows, dim=0) of [1, ...] rows is the rows stacked: read
        # by a sum, mean or index over dim 0 like torch.stack (a [k, d]
        # matrix of per-instance rows has no batchlab shape).
        return Stacked(tuple(vals))
    if len(vals) == 1:
        return vals[0]
    for r in raw:
        if bl_dim(_tshape_of(lw, r), dim) != 0:
            raise lw.fail(
                f"cat along dim {dim} of a tensor of shape {list(_tshape_of(lw, r))}: batchlab concatenates along "
                "the first non-batch dim only"
            )
    rest = vals[0].shape[1:]
    if any(v.shape[1:] != rest for v in vals):
        raise lw.fail("cat of tensors whose other dims differ")
    return lw.emit("concat", vals, (sum(v.shape[0] for v in vals),) + rest)


def _split_sizes(lw: Lowerer, x: Val, sizes: list[int]) -> tuple[Val, ...]:
    out, at = [], 0
    for s in sizes:
        out.append(lw.slice_(x, at, s))
        at += s
    return tuple(out)


def _check_dim0(lw: Lowerer, raw: Any, dim: int) -> None:
    if bl_dim(_tshape_of(lw, raw), dim) != 0:
        raise lw.fail(f"splitting dim {dim}: batchlab slices the first non-batch dim only")


@rule("torch.Tensor.chunk", "torch.chunk")
def _chunk(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x, n, dim = lw.val(a[0]), _arg(a, k, 1, "chunks"), _arg(a, k, 2, "dim", 0)
    _check_dim0(lw, ra[0], dim)
    size = x.shape[0]
    step = -(-size // n)
    sizes = [min(step, size - i) for i in range(0, size, step)]
    return _split_sizes(lw, x, sizes)


@rule("torch.functional.split", "torch.Tensor.split", "torch.split", "torch.Tensor.split_with_sizes")
def _split(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x = lw.val(a[0])
    sz = _arg(a, k, 1, "split_size_or_sections", k.get("split_size", k.get("split_sizes")))
    dim = _arg(a, k, 2, "dim", 0)
    _check_dim0(lw, ra[0], dim)
    size = x.shape[0]
    sizes = [min(sz, size - i) for i in range(0, size, sz)] if isinstance(sz, int) else list(sz)
    return _split_sizes(lw, x, sizes)


@rule("torch.Tensor.narrow", "torch.narrow")
def _narrow(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x, dim, start, length = lw.val(a[0]), a[1], a[2], a[3]
    _check_dim0(lw, ra[0], dim)
    return lw.slice_(x, start % x.shape[0], length)


@rule("torch.Tensor.__getitem__")
def _getitem(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x, idx = a[0], a[1]
    if isinstance(x, Stacked):
        if isinstance(idx, int):
            return x.items[idx]
        if isinstance(idx, slice) and idx.step in (None, 1):
            # Rows of the stack (h[t : t + 1] is row t, as it was).
            sel = range(len(x.items))[idx]
            return x.items[sel[0]] if len(sel) == 1 else Stacked(tuple(x.items[j] for j in sel))
        raise lw.fail("indexing a stack with other than an int or a slice")
    v = lw.val(x)
    ts = _tshape_of(lw, ra[0])
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(i is Ellipsis for i in idx[:-1]) or any(i is None for i in idx):
        raise lw.fail("indexing with ... or None")
    idx = tuple(i for i in idx if i is not Ellipsis)
    lead = len(ts) - len(bl_shape(ts)) if ts else 0
    result = v
    for d, i in enumerate(idx):
        full = isinstance(i, slice) and i == slice(None)
        if d < lead:
            if not (full or i in (0, -1) or (isinstance(i, slice) and i.step in (None, 1) and (i.start or 0) == 0)):
                raise lw.fail(f"index {i!r} of a size-1 dim")
            continue
        if d > lead:
            if not full:
                raise lw.fail("indexing past the first non-batch dim")
            continue
        if full:
            continue
        n = v.shape[0]
        if isinstance(i, int):
            result = lw.slice_(v, i % n, 1)
            if len(v.shape) > 1:
                raise lw.fail("an int index that drops a matrix dim")
        elif isinstance(i, slice) and i.step in (None, 1):
            start, stop, _ = i.indices(n)
            result = lw.slice_(v, start, stop - start)
        else:
            raise lw.fail(f"index {i!r}")
    return result


@rule("torch.nn.functional.embedding")
def _embedding(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    ids, w = a[0], a[1]
    if not isinstance(ids, DataIn):
        raise lw.fail("the ids of an embedding must be an integer tensor given to the call (the node's token id)")
    if isinstance(w, Val) and w.kind == "param":
        lw.matrix(w)
    if not (isinstance(w, Val) and w.kind == "param" and len(w.shape) == 2):
        raise lw.fail("the table of an embedding must be a parameter of two dims")
    if k.get("max_norm") is not None:
        raise lw.fail("embedding with max_norm")
    _use(lw, ids, "id")
    return lw.emit("lookup", [w], (w.shape[1],))


def _use(lw: Lowerer, d: DataIn, kind: str) -> None:
    was = lw.data_use.get(d.position)
    if was is not None and was != kind:
        raise lw.fail("one integer input read both as a token id and as a label")
    if kind in lw.data_use.values() and was is None:
        raise lw.fail(f"a second integer input read as a {kind}: a node carries one token id and one label")
    lw.data_use[d.position] = kind


def _pick_loss(lw: Lowerer, logits: Val, target: Any, k: dict) -> Val:
    if not isinstance(target, DataIn):
        raise lw.fail("the target of a loss must be an integer tensor given to the call (the node's label)")
    if len(logits.shape) != 1:
        raise lw.fail(f"a loss over logits of batchlab shape {list(logits.shape)}; batchlab's loss reads one vector")
    if k.get("weight") is not None or k.get("label_smoothing", 0.0) not in (0, 0.0):
        raise lw.fail("a loss with class weights or label smoothing")
    if k.get("reduction", "mean") not in ("mean", "sum"):
        raise lw.fail("a loss with reduction='none'")
    _use(lw, target, "label")
    return lw.emit("pick_loss", [logits], (1,))


@rule("torch.nn.functional.cross_entropy")
def _cross_entropy(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    return _pick_loss(lw, lw.val(a[0], "logits"), _arg(a, k, 1, "target"), k)


@rule("torch.nn.functional.log_softmax", "torch.log_softmax", "torch.Tensor.log_softmax")
def _log_softmax(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    v = lw.val(a[0])
    dim = _arg(a, k, 1, "dim")
    if dim is None or len(v.shape) != 1 or bl_dim(_tshape_of(lw, ra[0]), dim) != 0:
        raise lw.fail("log_softmax over other than the one dim of a vector")
    assert lw.node is not None
    return LogSoftmax(v, lw.node)


@rule("torch.nn.functional.nll_loss")
def _nll(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x = a[0]
    if not isinstance(x, LogSoftmax):
        raise lw.fail("nll_loss of other than log_softmax")
    return _pick_loss(lw, x.of, _arg(a, k, 1, "target"), k)


@rule("torch.Tensor.t", "torch.t", "torch.Tensor.T.__get__", "torch.Tensor.mT.__get__")
def _t(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x = a[0]
    if isinstance(x, ParamT):
        return x.param
    if isinstance(x, Val) and x.kind == "param" and len(x.shape) == 2:
        return ParamT(lw.matrix(x))
    raise lw.fail("transposing other than a weight")


@rule(
    "torch.Tensor.matmul",
    "torch.matmul",
    "torch.mm",
    "torch.mv",
    "torch.Tensor.mm",
    "torch.Tensor.mv",
    "torch.Tensor.__matmul__",
)
def _matmul(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x, y = a[0], _arg(a, k, 1, "other", k.get("mat2", k.get("vec")))
    if isinstance(x, Zero) or isinstance(y, Zero):
        return Zero(lw.out_tshape())
    stacked = next((v for v in (x, y) if isinstance(v, Stacked)), None)
    if stacked is not None and len(stacked.items) > 1:
        # The real cause first: whatever the other operand's orientation,
        # a product with a stack of rows (the scores of dot-product
        # attention, H @ q) is what has no op.
        raise lw.fail(
            f"a product with a stack of {len(stacked.items)} rows (the scores of dot-product attention, "
            "torch.stack(hs) @ q) has no batchlab op: batchlab reads a stack only through sum(0), mean(0), "
            "an index or a row-wise call (linear, sigmoid, tanh, relu, + - *)"
        )
    if isinstance(y, ParamT):  # x @ W.t(): W x
        v = lw.val(x)
        w = y.param
        if len(v.shape) != 1 or v.shape[0] != w.shape[1]:
            raise lw.fail("x @ W.t() with x other than a row vector")
        return lw.emit("matmul", [w, v], (w.shape[0],))
    if isinstance(x, Val) and x.kind == "param":
        lw.matrix(x)
        v = lw.val(y)
        if (
            len(x.shape) != 2
            or len(v.shape) != 1
            or _tshape_of(lw, ra[1])[-1:] == (1,)
            and len(_tshape_of(lw, ra[1])) > 1
        ):
            raise lw.fail("W @ x with x other than a vector")
        return lw.emit("matmul", [x, v], (x.shape[0],))
    if isinstance(y, Val) and y.kind == "param":
        raise lw.fail(
            "x @ W with a weight W of shape [in, out]: batchlab multiplies W x with W as [out, in]; "
            "write F.linear(x, W) or x @ W.t() with W stored as [out, in]"
        )
    vx, vy = lw.val(x), lw.val(y)
    tx, ty = _tshape_of(lw, ra[0]), _tshape_of(lw, ra[1])
    if (
        len(vx.shape) == 2
        and len(tx) == 2
        and len(ty) in (1, 2)
        and vy.shape == bl_shape(ty)
        and len(vy.shape) == len(ty)
    ):
        if vx.shape[1] != vy.shape[0]:
            raise lw.fail("product of mismatched shapes")
        return lw.emit("matmul", [vx, vy], (vx.shape[0],) + vy.shape[1:])
    raise lw.fail(f"product of shapes {list(tx)} and {list(ty)}")


@rule("torch.stack")
def _stack(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    if _arg(a, k, 1, "dim", 0) != 0:
        raise lw.fail("stack along other than dim 0")
    return Stacked(tuple(a[0]))


@rule("torch.Tensor.unbind", "torch.unbind")
def _unbind(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    if isinstance(a[0], Stacked) and _arg(a, k, 1, "dim", 0) == 0:
        return a[0].items
    raise lw.fail("unbind of other than a stack")


def _reduce(op: str) -> Rule:
    def f(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
        x = a[0]
        dim = _arg(a, k, 1, "dim")
        if isinstance(x, Stacked):
            # keepdim keeps a leading dim of 1: the same batchlab value.
            if dim not in (None, 0, (0,), [0]):
                raise lw.fail(f"{op} of a stack along other than dim 0")
            vals = [v for v in x.items if not isinstance(v, Zero)]
            vals = [lw.val(v, "stacked tensor") for v in vals]
            if not vals:
                return Zero(lw.out_tshape())
            if dim is None and vals[0].shape != (1,):
                raise lw.fail(f"{op} over every element of a stack of vectors")
            if len(vals) == 1:
                return vals[0]
            if op == "mean" and len(vals) != len(x.items):
                raise lw.fail("mean of a stack holding zeros")
            return lw.emit(op, vals, vals[0].shape)
        v = lw.val(x)
        if v.shape == (1,):
            return v
        raise lw.fail(f"{op} over the elements of a tensor; batchlab reduces only across stacked tensors")

    return f


rule("torch.sum", "torch.Tensor.sum")(_reduce("sum"))
rule("torch.mean", "torch.Tensor.mean")(_reduce("mean"))


def _zeros(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    return Zero(lw.out_tshape())


for _n in ZEROS:
    RULES[_n] = _zeros


@rule("torch.tensor", "torch.as_tensor", "torch.scalar_tensor")
def _constant(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    raise lw.fail(
        "a tensor made inside the cell from Python values; batchlab's cells take their integers (ids, labels) "
        "and tensors as arguments: make it outside and pass it in, e.g. self.out(h, torch.tensor([y]))"
    )


def _alias(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x = a[0]
    if k.get("training") or (len(a) > 2 and a[2] is True):
        # A dropout that drops nothing (p = 0) is the identity in any mode.
        p = k.get("p", a[1] if len(a) > 1 else 0.5)
        if p != 0:
            raise lw.fail("dropout in training mode: record in eval mode (model.eval())")
    if isinstance(x, Zero):
        return Zero(lw.out_tshape())
    if isinstance(x, DataIn) and lw.node is not None and name_of(lw.node.target) in INTEGER_ALIASES:
        # An id or a label reshaped is that id or label (a node carries one
        # integer of each): `F.cross_entropy(logits.unsqueeze(0),
        # target.unsqueeze(0))`, the commonest per-instance loss.
        if math.prod(lw.out_tshape()) != 1:
            raise lw.fail(f"a reshape of an integer input to shape {list(lw.out_tshape())}; a node carries one integer")
        return x
    v = lw.val(x)
    if v.shape != bl_shape(lw.out_tshape()):
        raise lw.fail(f"a reshape from batchlab shape {list(v.shape)} to {list(bl_shape(lw.out_tshape()))}")
    return v


for _n in ALIASES:
    RULES[_n] = _alias


@rule("torch.lstm_cell")
def _lstm_cell(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x, hx, w_ih, w_hh = a[0], a[1], a[2], a[3]
    b_ih, b_hh = _arg(a, k, 4, "b_ih"), _arg(a, k, 5, "b_hh")
    h, c = hx
    x = lw.val(x, "input")
    hsz = w_hh.shape[1]
    terms: list[Val] = [w_ih, x]
    if not isinstance(h, Zero):
        terms += [w_hh, lw.val(h, "h")]
    gates = _gate_sum(lw, b_ih, b_hh, terms, (4 * hsz,))
    i, f, g, o = (lw.slice_(gates, j * hsz, hsz) for j in range(4))
    i, f, o = (lw.emit("sigmoid", [v], v.shape) for v in (i, f, o))
    g = lw.emit("tanh", [g], g.shape)
    ig = lw.emit("mul", [i, g], g.shape)
    if isinstance(c, Zero):
        c2 = ig
    else:
        fc = lw.emit("mul", [f, lw.val(c, "c")], g.shape)
        c2 = lw.emit("add", [fc, ig], g.shape)
    h2 = lw.emit("mul", [o, lw.emit("tanh", [c2], g.shape)], g.shape)
    return (h2, c2)


def _gate_sum(lw: Lowerer, b1: Any, b2: Any, terms: list[Any], shape: Shape) -> Val:
    """``b1 + Σ W x + b2`` as an affine (plus an add for the second bias)."""
    if b1 is None and b2 is None:
        acc = lw.emit("matmul", terms[:2], shape)
        for w, v in zip(terms[2::2], terms[3::2]):
            acc = lw.emit("add", [acc, lw.emit("matmul", [w, v], shape)], shape)
        return acc
    first, second = (b1, b2) if b1 is not None else (b2, None)
    acc = lw.emit("affine", [lw.val(first, "bias")] + terms, shape)
    if second is not None:
        acc = lw.emit("add", [acc, lw.val(second, "bias")], shape)
    return acc


def _rnn_cell(act: str) -> Rule:
    def f(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
        x, h, w_ih, w_hh = a[0], a[1], a[2], a[3]
        b_ih, b_hh = _arg(a, k, 4, "b_ih"), _arg(a, k, 5, "b_hh")
        terms: list[Any] = [w_ih, lw.val(x, "input")]
        if not isinstance(h, Zero):
            terms += [w_hh, lw.val(h, "h")]
        pre = _gate_sum(lw, b_ih, b_hh, terms, (w_hh.shape[1],))
        return lw.emit(act, [pre], pre.shape)

    return f


rule("torch.rnn_tanh_cell")(_rnn_cell("tanh"))
rule("torch.rnn_relu_cell")(_rnn_cell("relu"))


@rule("torch.gru_cell")
def _gru_cell(lw: Lowerer, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    x, h, w_ih, w_hh = a[0], a[1], a[2], a[3]
    b_ih, b_hh = _arg(a, k, 4, "b_ih"), _arg(a, k, 5, "b_hh")
    x = lw.val(x, "input")
    hsz = w_hh.shape[1]
    gi = _gate_sum(lw, b_ih, None, [w_ih, x], (3 * hsz,))
    zero_h = isinstance(h, Zero)
    if zero_h:
        if b_hh is None:
            raise lw.fail("a GRU cell without bias started from zeros")
        gh = lw.val(b_hh, "bias")
    else:
        h = lw.val(h, "h")
        gh = _gate_sum(lw, b_hh, None, [w_hh, h], (3 * hsz,))
    sl = lambda v, j: lw.slice_(v, j * hsz, hsz)  # noqa: E731
    r = lw.emit("sigmoid", [lw.emit("add", [sl(gi, 0), sl(gh, 0)], (hsz,))], (hsz,))
    z = lw.emit("sigmoid", [lw.emit("add", [sl(gi, 1), sl(gh, 1)], (hsz,))], (hsz,))
    n = lw.emit("tanh", [lw.emit("add", [sl(gi, 2), lw.emit("mul", [r, sl(gh, 2)], (hsz,))], (hsz,))], (hsz,))
    keep = lw.emit("mul", [lw.emit("one_minus", [z], (hsz,)), n], (hsz,))
    if zero_h:
        return keep
    return lw.emit("add", [keep, lw.emit("mul", [z, h], (hsz,))], (hsz,))


def _per_row(lw: Lowerer, f: Rule, a: tuple, k: dict, ra: tuple, rk: dict) -> Any:
    """A row-wise call with a stack among its arguments: the rule once per
    row, the results stacked again."""
    stacks = [x for x in list(a) + list(k.values()) if isinstance(x, Stacked)]
    n = len(stacks[0].items)
    if any(len(x.items) != n for x in stacks):
        raise lw.fail(f"a row-wise call on stacks of {sorted({len(x.items) for x in stacks})} rows")
    pick = lambda x, i: x.items[i] if isinstance(x, Stacked) else x  # noqa: E731
    rows = []
    for i in range(n):
        ai = tuple(pick(x, i) for x in a)
        ki = {kk: pick(v, i) for kk, v in k.items()}
        rows.append(f(lw, ai, ki, ra, rk))
    return Stacked(tuple(rows))


def _map(x: Any, f: Callable[[Any], Any]) -> Any:
    if isinstance(x, (list, tuple)):
        return type(x)(_map(i, f) for i in x)
    if isinstance(x, dict):
        return {kk: _map(vv, f) for kk, vv in x.items()}
    if isinstance(x, slice):
        return slice(_map(x.start, f), _map(x.stop, f), _map(x.step, f))
    return f(x)


def lower(graph: fx.Graph, cell: Cell, inputs: dict[str, Any], params: dict[str, Val], where: str) -> Lowerer:
    """Lowers ``graph`` into ``cell``: ``inputs`` gives each placeholder's
    value (a :class:`Val`, or :class:`DataIn` for an integer input),
    ``params`` each ``get_attr`` target's. Sets the cell's outputs; returns
    the lowerer (its ``data_use`` and ``origin``)."""
    lw = Lowerer(cell, where)

    def look(n: Any) -> Any:
        if isinstance(n, fx.Node):
            return lw.env[n]
        if isinstance(n, bool) or n is None or isinstance(n, str):
            return n
        if isinstance(n, (int, float)):
            return n
        return n

    for n in graph.nodes:
        lw.node = n
        if n.op == "placeholder":
            lw.env[n] = inputs[n.target]
        elif n.op == "get_attr":
            lw.env[n] = params[n.target]
        elif n.op == "call_function":
            if n.target is operator.getitem:
                base = lw.env[n.args[0]]
                lw.env[n] = base[n.args[1]]
                continue
            name = name_of(n.target)
            f = RULES.get(name)
            if f is None:
                raise lw.fail(
                    "batchlab has no op for this call (supported: see docs/torch.md, 'What a cell may contain')"
                )
            va = _map(n.args, look)
            vk = {kk: _map(vv, look) for kk, vv in n.kwargs.items()}
            if any(isinstance(x, Stacked) for x in list(va) + list(vk.values())) and calls.rowwise(
                name, n.args, dict(n.kwargs), between_cells=False, ndim=len(_tshape_of(lw, n.args[0]))
            ):
                out = _per_row(lw, f, va, vk, n.args, dict(n.kwargs))
            else:
                out = f(lw, va, vk, n.args, dict(n.kwargs))
            ts = n.meta.get("tshape")
            if isinstance(out, Val) and isinstance(ts, tuple) and all(isinstance(d, int) for d in ts):
                lw.check_shape(out, ts)
                lw.origin.setdefault(out.name, n)
            lw.env[n] = out
        elif n.op == "output":
            outs = n.args[0]
            flat = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            vals = []
            for i, o in enumerate(flat):
                v = lw.env[o] if isinstance(o, fx.Node) else o
                if isinstance(v, Zero):
                    raise lw.fail(f"output {i} is a tensor of zeros made inside the cell")
                vals.append(lw.val(v, f"output {i}"))
            cell.finish(vals)
        else:
            raise lw.fail(f"fx node kind {n.op}")
    return lw


def tshape(x: Any) -> Any:
    """The shape (or shapes, for a tuple) of a torch call's result, for ``meta``."""
    if isinstance(x, torch.Tensor):
        return tuple(x.shape)
    if isinstance(x, (tuple, list)):
        return tuple(tshape(i) for i in x)
    return None
