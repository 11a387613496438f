"""What a torch call is, by its canonical name.

``torch.overrides.TorchFunctionMode`` hands every torch call to the recorder
as a function object; :func:`name_of` turns it into the canonical dotted
name (``torch.nn.functional.linear``, ``torch.Tensor.add``), and the sets
here say what the recorder, the lowering and :func:`batchlab_torch.run` do
with it. This is the one place that classifies torch calls.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from torch.overrides import resolve_name


@functools.lru_cache(maxsize=4096)
def _resolved(func: Callable[..., Any]) -> str:
    name = resolve_name(func)
    if name is None:
        mod = getattr(func, "__module__", None) or "?"
        name = f"{mod}.{getattr(func, '__qualname__', repr(func))}"
    return name


def name_of(func: Callable[..., Any]) -> str:
    """The canonical dotted name of a torch function."""
    try:
        return _resolved(func)
    except TypeError:  # an unhashable callable: resolve it every time
        return resolve_name(func) or repr(func)


def short(name: str) -> str:
    """The name without its namespace: ``torch.nn.functional.linear`` -> ``linear``."""
    return name.rsplit(".", 1)[-1] if not name.endswith(".__get__") else name.rsplit(".", 2)[-2]


# Calls that read metadata or convert, never compute a recorded value.
META = frozenset(
    {
        "torch.Tensor.size",
        "torch.Tensor.dim",
        "torch.Tensor.ndimension",
        "torch.Tensor.numel",
        "torch.Tensor.nelement",
        "torch.Tensor.__len__",
        "torch.Tensor.is_contiguous",
        "torch.Tensor.is_floating_point",
        "torch.Tensor.get_device",
        "torch.Tensor.__repr__",
        "torch.Tensor.__format__",
        "torch.Tensor.__hash__",
        "torch.Tensor.__bool__",
        "torch.Tensor.__index__",
        "torch.Tensor.__int__",
        "torch.Tensor.__float__",
        "torch.Tensor.item",
        "torch.Tensor.tolist",
        "torch.Tensor.numpy",
        "torch.Tensor.argmax",
        "torch.Tensor.argmin",
        "torch.argmax",
        "torch.argmin",
        "torch.Tensor.eq",
        "torch.Tensor.__eq__",
        "torch.Tensor.__ne__",
        "torch.Tensor.ne",
        "torch.Tensor.register_hook",
        "torch.Tensor.retain_grad",
        "torch.Tensor.requires_grad_",
        "torch.Tensor.backward",
        "torch.Tensor.data_ptr",
        "torch.Tensor.element_size",
        "torch.Tensor.stride",
        "torch.Tensor.storage_offset",
        "torch.Tensor.untyped_storage",
        "torch.Tensor.__reduce_ex__",
        "torch.Tensor.__deepcopy__",
        "torch.Tensor.__setstate__",
        "torch.Tensor.__dir__",
        "torch.is_tensor",
        "torch.is_floating_point",
        "torch.numel",
    }
)

# Calls that create a tensor of zeros (an absent optional input when it
# reaches a cell).
ZEROS = frozenset({"torch.zeros", "torch.zeros_like", "torch.Tensor.new_zeros"})

# Calls that only reshape or copy and keep an integer tensor an integer
# tensor of the same numbers: an id or a label reshaped
# (``target.unsqueeze(0)`` for a loss over a batch of one) is still that id
# or label.
INTEGER_ALIASES = frozenset(
    {
        "torch.Tensor.view",
        "torch.Tensor.view_as",
        "torch.Tensor.reshape",
        "torch.reshape",
        "torch.Tensor.reshape_as",
        "torch.Tensor.squeeze",
        "torch.squeeze",
        "torch.Tensor.unsqueeze",
        "torch.unsqueeze",
        "torch.Tensor.flatten",
        "torch.flatten",
        "torch.Tensor.contiguous",
        "torch.Tensor.clone",
        "torch.clone",
        "torch.Tensor.detach",
        "torch.detach",
        "torch.Tensor.cpu",
        "torch.Tensor.cuda",
    }
)

# Calls that only reshape or copy: the value is the same numbers. Beyond
# the integer ones, those that make floats of an integer (``float``, ``to``)
# or take floats only (``dropout``) or broadcast (``expand_as``).
ALIASES = INTEGER_ALIASES | frozenset(
    {
        "torch.Tensor.float",
        "torch.Tensor.to",
        "torch.nn.functional.dropout",
        "torch.dropout",
        "torch.Tensor.expand_as",
    }
)


# Calls that compute row by row: on a stack of recorded rows (between
# cells, ``emb(ids)`` or ``torch.cat(hs)``; inside a cell, ``torch.cat(hs)``)
# each row gets the call of its own, as if the code had made it once per
# row, and the rows' results are a stack again. An operand that is not a
# stack is one row, broadcast to every row.
ROWWISE = frozenset(
    {
        "torch.nn.functional.linear",
        "torch.sigmoid",
        "torch.Tensor.sigmoid",
        "torch.nn.functional.sigmoid",
        "torch.tanh",
        "torch.Tensor.tanh",
        "torch.nn.functional.tanh",
        "torch.relu",
        "torch.Tensor.relu",
        "torch.nn.functional.relu",
        "torch.nn.functional.gelu",
        "torch.exp",
        "torch.Tensor.exp",
        "torch.neg",
        "torch.negative",
        "torch.Tensor.neg",
        "torch.Tensor.negative",
        "torch.Tensor.__neg__",
        "torch.Tensor.div",
        "torch.div",
        "torch.Tensor.__truediv__",
        "torch.true_divide",
        "torch.Tensor.add",
        "torch.add",
        "torch.Tensor.__add__",
        "torch.Tensor.__radd__",
        "torch.Tensor.sub",
        "torch.sub",
        "torch.Tensor.__sub__",
        "torch.Tensor.__rsub__",
        "torch.rsub",
        "torch.Tensor.mul",
        "torch.mul",
        "torch.Tensor.__mul__",
        "torch.Tensor.__rmul__",
        "torch.nn.functional.dropout",
    }
)

# Row-wise only along the last (feature) dim: a softmax over dim 0 of a
# stack mixes its rows (attention weights), which is no row-wise call.
ROWWISE_LAST_DIM = frozenset({"torch.nn.functional.softmax", "torch.softmax", "torch.Tensor.softmax"})

# Between cells, also row-wise: a lookup of an integer vector (a row per
# id), and a loss of a stack of rows against a label vector, then reduced
# over the rows by its ``reduction`` (a sum or mean node of the rows' losses).
LOOKUPS = frozenset({"torch.nn.functional.embedding"})
ROW_LOSSES = frozenset({"torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss"})

# Calls that make a constant tensor from Python numbers: one of zeros only
# (``loss = torch.tensor(0.0)`` before a loop adding the losses) is a zero.
CONSTANTS = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})

# torch.cat and its aliases (a cat along dim 0 of rows stacks them).
CATS = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})

# Short names of a division and a product (a sum of k values divided by k
# is their mean).
DIVS = frozenset({"div", "__truediv__", "true_divide", "divide"})
MULS = frozenset({"mul", "__mul__", "__rmul__", "multiply"})


def rowwise(name: str, args: tuple, kwargs: dict, between_cells: bool, ndim: int | None = None) -> bool:
    """Whether the call computes row by row (see ``ROWWISE``): inside a
    cell the element-wise calls and ``linear``, and a softmax along the
    last dim; between cells also lookups and per-row losses. ``ndim``: the
    first argument's number of dims, where its ``shape`` does not tell."""
    if name in ROWWISE:
        return True
    if name in ROWWISE_LAST_DIM:
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        n = ndim if ndim is not None else len(args[0].shape) if args and hasattr(args[0], "shape") else 0
        return isinstance(dim, int) and n > 0 and dim % n == n - 1
    return between_cells and (name in LOOKUPS or name in ROW_LOSSES)


def is_meta(name: str) -> bool:
    """Metadata reads (``.shape``, ``.size()``, ``.dtype``, ``len()``...)."""
    return name in META or name.endswith(".__get__")


def is_inplace(name: str) -> bool:
    """In-place calls (``add_``, ``+=``): they would change a recorded value."""
    last = short(name)
    if last.startswith("__i") and last.endswith("__") and last not in ("__index__", "__int__"):
        return True
    return last.endswith("_") and not last.endswith("__") and name not in META


_HERE = os.path.dirname(os.path.abspath(__file__))
_EXAMPLES = os.path.join(_HERE, "examples")
_TORCH = os.path.dirname(os.path.abspath(sys.modules["torch"].__file__ or "")) if "torch" in sys.modules else None


class Where:
    """Where a call came from, taken now and written out only when needed
    (an error, a new kind): walking the stack costs microseconds a call."""

    __slots__ = ("frame", "text")

    def __init__(self, frame: Any) -> None:
        self.frame = frame
        self.text: str | None = None

    def __str__(self) -> str:
        if self.text is None:
            self.text = _outside(self.frame)
            self.frame = None
        return self.text

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


def here() -> Where:
    """The caller's place, for :class:`Where`: taken from the caller's
    caller's frame, so that the ``Where`` a function keeps in a local makes
    no cycle with that function's own frame (a cycle would keep every frame
    and value of the call alive until the garbage collector runs)."""
    return Where(sys._getframe(2))


def user_frame() -> str:
    """``file:line in function`` of the innermost frame outside torch and
    batchlab_torch: the line of the user's code that made the call."""
    return _outside(sys._getframe(1))


def _outside(f: Any) -> str:
    while f is not None:
        path = f.f_code.co_filename
        ours = path.startswith(_HERE) and not path.startswith(_EXAMPLES)
        if not ours and not (_TORCH and path.startswith(_TORCH)):
            return f"{_shown(path)}:{f.f_lineno} in {f.f_code.co_name}"
        f = f.f_back
    return "<unknown>"


def _shown(path: str) -> str:
    """A source path relative to the working folder when inside it, so a
    recording made from a checkout names its files the same anywhere."""
    cwd = os.getcwd()
    if path.startswith(cwd + os.sep):
        return os.path.relpath(path, cwd)
    return path
