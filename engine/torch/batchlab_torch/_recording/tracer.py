"""What recording and :func:`batchlab_torch.run` share: running the user's
own per-instance forward and turning its calls into graph nodes.

A :class:`Tracer` patches the marked submodules' ``forward`` and the
model's, and enters a ``TorchFunctionMode`` that sees every torch call.
A call of a marked module is a *cell* node; a torch call between cells
that reads a recorded value is a free *op* node, except the calls that only
move values (sums, stacks and their reductions and indices, reshapes: see
:meth:`Tracer._special`). Every recorded value carries its source
(:class:`~batchlab_torch.graph.Src`). Each top-level call of the model is
one instance (sample).

Two subclasses decide what a call produces: :class:`~batchlab_torch.record.Recorder`
runs it eagerly (real tensors, tagged with their source), the run's
discovery (:mod:`batchlab_torch.run`) does not run it at all (placeholder
values of the right shapes), so both build the same graph with the same
node types from the same code.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .. import _calls as calls
from .._flat import flatten, spec_key, unflatten
from .cell import bl_shape
from .graph import Graph, Kind, Kinds, RecordError, Src

_TAG = "_batchlab_src"
_tokens = itertools.count(1)


class Zero:
    """Tag of a tensor of zeros made between cells (an absent input)."""


ZERO = Zero()


class Stack:
    """Tag of ``torch.stack``/``torch.cat`` of recorded values along dim 0
    (``cat``: the items keep their leading dim of 1 as the rows)."""

    def __init__(self, items: list[Src | None], item_tshape: tuple[int, ...], cat: bool = False) -> None:
        self.items = items
        self.item_tshape = item_tshape
        self.cat = cat


class Derived:
    """Tag of a tensor computed from parameters outside every cell."""

    def __init__(self, frame: str) -> None:
        self.frame = frame


class LogSoftmaxOf:
    """Tag of ``log_softmax`` of a recorded value (or stack) made between
    cells: batchlab has no log_softmax op, but ``nll_loss`` of it is
    ``cross_entropy`` of ``x``, which is recorded in its place."""

    def __init__(self, x: Any, frame: str) -> None:
        self.x = x
        self.frame = frame


class _Mode(TorchFunctionMode):
    def __init__(self, tracer: Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        return self.tracer._on_call(func, args, kwargs or {})


class Signature:
    """How a marked module's arguments flatten: names per leaf, and how to
    call it again from the leaves."""

    def __init__(self, forward: Callable[..., Any]) -> None:
        self.sig = inspect.signature(forward)
        ps = list(self.sig.parameters.values())
        plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        # The leading plain positional parameters: a call passing only those,
        # each a tensor, flattens without inspect's bind.
        self.positional: tuple[str, ...] = tuple(p.name for p in ps if p.kind in plain)
        self._fast: dict[int, tuple[Any, str]] = {}

    def fast(self, n: int) -> tuple[Any, str, tuple[str, ...]] | None:
        """Spec, spec key and names of a call with ``n`` plain tensor
        arguments, or None when such a call needs ``bind``."""
        if n > len(self.positional):
            return None
        hit = self._fast.get(n)
        if hit is None:
            spec = (tuple, None, (None,) * n)
            hit = (spec, spec_key(spec))
            self._fast[n] = hit
        return hit[0], hit[1], self.positional[:n]

    def flatten(self, args: tuple, kwargs: dict) -> tuple[list[Any], Any, list[str], tuple[str, ...]]:
        bound = self.sig.bind(*args, **kwargs)
        values = tuple(bound.arguments.values())
        leaves, spec = flatten(values)
        names: list[str] = []
        for pname, value in bound.arguments.items():
            sub, _ = flatten(value)
            names += [pname] if len(sub) == 1 else [f"{pname}_{i}" for i in range(len(sub))]
        return leaves, spec, names, tuple(bound.arguments.keys())

    def call_args(self, arg_names: tuple[str, ...], values: tuple) -> tuple[tuple, dict]:
        ba = inspect.BoundArguments(self.sig, dict(zip(arg_names, values)))  # type: ignore[arg-type]
        return ba.args, ba.kwargs


def static_repr(x: Any) -> str:
    """A non-tensor argument as part of a call's kind."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return repr(x)
    if isinstance(x, (torch.dtype, torch.device)):
        return str(x)
    if isinstance(x, slice):
        return f"slice({x.start},{x.stop},{x.step})"
    if isinstance(x, torch.Size):
        return repr(tuple(x))
    return f"<{type(x).__name__}>"


# The built-in workloads' names (`engine workloads`), which a model folder may
# not take: the tools would read its trace as the zoo workload's. Kept equal
# to the engine's list by tests/test_errors.py.
ZOO_WORKLOADS = frozenset(
    {
        "bilstm-tagger",
        "bilstm-tagger-char",
        "lstm-nmt",
        "tree-lstm",
        "tree-gru",
        "mv-rnn",
        "tree-lstm-2type",
        "lattice-lstm",
        "lattice-gru",
        "fixed-lstm",
        "var-lstm",
        "tree-fc",
        "td-rnn",
        "td-lstm",
        "rvnn",
    }
)


def check_name(name: str, who: str) -> str:
    """``name`` if a model folder may bear it (not empty, not a zoo
    workload's), else a :class:`RecordError` naming ``who``'s ``name=``."""
    if not isinstance(name, str) or not name:
        raise RecordError(f"{who}: name={name!r}: give a non-empty string (default: torch- and the class's name)")
    if name in ZOO_WORKLOADS:
        raise RecordError(
            f"{who}: name={name!r} is a built-in workload's name (`engine workloads`); "
            "the tools would read the recording as that workload: choose another name"
        )
    return name


def default_name(model: nn.Module) -> str:
    """``torch-`` and the model class's name in kebab case (``TreeLSTM`` ->
    ``torch-tree-lstm``): never a zoo workload's name."""
    n = type(model).__name__
    out = []
    for i, c in enumerate(n):
        if c.isupper() and i > 0 and (not n[i - 1].isupper() or (i + 1 < len(n) and n[i + 1].islower())):
            out.append("-")
        out.append(c.lower())
    return "torch-" + ("".join(out) or "model")


class Tracer:
    """See the module docs. Subclasses implement :meth:`_run_cell`,
    :meth:`_run_op`, :meth:`_run_special` and :meth:`_emit`."""

    # Whether the graph keeps each node's output tensors (a recording's
    # expected values) or only its structure (bt.run's discovery).
    keeps_values = False

    def __init__(self, model: nn.Module, cells: Mapping[str, nn.Module], *, name: str | None = None) -> None:
        who = type(self).__name__
        if not isinstance(model, nn.Module):
            raise RecordError(f"{who}: model must be a torch.nn.Module, got {type(model).__name__}")
        if not cells:
            raise RecordError(f"{who}: cells is empty; mark at least one submodule, e.g. cells={{'node': model.node}}")
        paths = {id(m): p for p, m in model.named_modules(remove_duplicate=False)}
        self.model = model
        self.name = name or default_name(model)
        self.cells: dict[str, nn.Module] = {}
        self.paths: dict[str, str] = {}
        for role, mod in cells.items():
            if not isinstance(mod, nn.Module):
                raise RecordError(f"{who}: cells[{role!r}] is a {type(mod).__name__}, not a torch.nn.Module")
            if mod is model:
                raise RecordError(f"{who}: cells[{role!r}] is the model itself; mark its submodules")
            if id(mod) not in paths:
                raise RecordError(f"{who}: cells[{role!r}] is not a submodule of the model")
            if any(m is mod for m in self.cells.values()):
                raise RecordError(f"{who}: cells[{role!r}] marks a module already marked under another name")
            if not role or not role.isascii() or any(not (c.isalnum() or c in "_.-") for c in role):
                raise RecordError(f"{who}: cell name {role!r}: use ASCII letters, digits, '_', '.', '-'")
            self.cells[role] = mod
            self.paths[role] = paths[id(mod)] or role
        self.param_names: dict[int, str] = {}
        for pname, p in model.named_parameters(remove_duplicate=False):
            self.param_names.setdefault(id(p), pname)
        self.params: dict[str, torch.Tensor] = {}
        self.sigs = {role: Signature(mod.forward) for role, mod in self.cells.items()}
        self.graph = Graph(values=self.keeps_values)
        self.kinds: Kinds = self.graph.kinds
        self.instances = 0
        self._token = next(_tokens)
        self._mode: _Mode | None = None
        self._in_cell = False
        self._depth = 0
        self._instance = -1
        self._active = False
        self._saved: list[tuple[nn.Module, bool, Any]] = []
        # The type of the placeholders this tracer hands out (discovery), for
        # the fast paths; None when it hands out real tensors. Objects of the
        # ``placeholders`` types never run a torch call as they are.
        self.placeholder: Any = None
        self.placeholders: tuple[type, ...] = ()

    # ------------------------------------------------------------ activation
    def __enter__(self) -> Tracer:
        if self._active:
            raise RecordError(f"{type(self).__name__}: already active")
        for role, mod in self.cells.items():
            self._hook_cell(role, mod)
        self._patch(self.model, self._root_wrapper(self.model.forward))
        self._start()
        self._active = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self._active = False
        self._stop()
        for mod, had, old in reversed(self._saved):
            if had:
                mod.forward = old
            else:
                del mod.forward
        self._saved.clear()
        self._in_cell = False
        self._depth = 0

    def _start(self) -> None:
        """Starts seeing the torch calls between cells: a ``TorchFunctionMode``
        sees every one (a recording runs on real tensors)."""
        self._mode = _Mode(self)
        self._mode.__enter__()

    def _stop(self) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None

    def _hook_cell(self, role: str, mod: nn.Module) -> None:
        """Makes every call of a marked module a node (its ``forward``
        patched: :meth:`_cell_wrapper`)."""
        self._patch(mod, self._cell_wrapper(role, mod, mod.forward))

    def _patch(self, mod: nn.Module, forward: Callable[..., Any]) -> None:
        had = "forward" in mod.__dict__
        self._saved.append((mod, had, mod.__dict__.get("forward")))
        mod.forward = forward

    def _root_wrapper(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def forward(*args: Any, **kwargs: Any) -> Any:
            if self._depth == 0:
                self._instance = self.instances
                self.instances += 1
            self._depth += 1
            try:
                out = orig(*args, **kwargs)
            finally:
                self._depth -= 1
            if self._depth == 0:
                self._returned(out)
            return out

        return forward

    def _cell_wrapper(self, role: str, mod: nn.Module, orig: Callable[..., Any]) -> Callable[..., Any]:
        def forward(*args: Any, **kwargs: Any) -> Any:
            if self._in_cell or not self._active:
                return orig(*args, **kwargs)
            return self._cell_call(role, mod, orig, args, kwargs)

        return forward

    def _returned(self, out: Any) -> None:
        """What a call of the model returned: its recorded values stay nodes
        of their own (never folded into a sum), as ``bt.run`` returns them."""
        for x in flatten(out)[0]:
            t = self.tag(x)
            if isinstance(t, Src):
                self.graph.keep.add(t.node)

    # ------------------------------------------------------------ tags
    def tag(self, x: Any) -> Any:
        """The source of a value: a :class:`Src`, ``ZERO``, a
        :class:`Stack`, a :class:`Derived`, or ``None`` (a constant)."""
        if isinstance(x, torch.Tensor):
            t = getattr(x, _TAG, None)
            return t[1] if t is not None and t[0] == self._token else None
        return None

    def set_tag(self, t: torch.Tensor, payload: Any) -> None:
        setattr(t, _TAG, (self._token, payload))

    def is_tensor(self, x: Any) -> bool:
        return isinstance(x, torch.Tensor)

    def instance_of(self, srcs: list[Src | None], frame: str, what: str) -> int | None:
        """The instance of a node with arguments ``srcs``: the current call's
        inside a call of the model (reading another sample's value is an
        error), else the one its arguments share, if any."""
        ginst = self.graph.inst
        if self._depth > 0:
            me = self._instance
            for s in srcs:
                if s is not None and ginst[s.node] != me and ginst[s.node] >= 0:
                    raise RecordError(
                        f"{frame}: {what} in sample {me} reads a value recorded in sample {ginst[s.node]}: "
                        "batchlab's samples are independent (a value kept across calls of the model cannot be "
                        "expressed in the trace)"
                    )
            return me
        # Outside every call: a value of no sample (the loop's running sum)
        # makes the node one of no sample too.
        inst = {ginst[s.node] for s in srcs if s is not None}
        return inst.pop() if len(inst) == 1 and -1 not in inst else None

    # ------------------------------------------------------------ arguments
    def classify(self, leaves: list[Any], frame: str, what: str, names: list[str]) -> tuple[list, list, dict]:
        """Per leaf: its entry of the call's kind (``("tensor", shape,
        dtype)``, ``("data", shape, dtype)``, ``("param", name)``,
        ``("static", repr)``); the sources of the tensor positions; the
        integers of the data positions."""
        kinds: list[tuple] = []
        srcs: list[Src | None] = []
        data: dict[int, int] = {}
        fast = self.placeholder
        for i, x in enumerate(leaves):
            if type(x) is fast:
                src = x.src
                if isinstance(src, Src):
                    kinds.append(("tensor", x.tshape, x.dts))
                    srcs.append(src)
                    continue
            if not self.is_tensor(x):
                kinds.append(("static", static_repr(x)))
                continue
            pname = self.param_names.get(id(x))
            if pname is not None:
                self.params[pname] = x
                kinds.append(("param", pname))
                continue
            tag = self.tag(x)
            label = names[i] if i < len(names) else f"argument {i}"
            if isinstance(tag, Src) or tag is ZERO:
                kinds.append(("tensor", tuple(x.shape), _dts(x.dtype)))
                srcs.append(tag if isinstance(tag, Src) else None)
            elif isinstance(tag, Stack):
                raise RecordError(
                    f"{frame}: {what} reads `{label}`, a stack of {len(tag.items)} recorded values; batchlab "
                    "records one value per argument: pass the values one by one, or sum them first"
                )
            elif isinstance(tag, Derived):
                raise RecordError(
                    f"{frame}: {what} reads `{label}`, computed from parameters outside every cell at "
                    f"{tag.frame}; the trace cannot express a tensor shared by every sample: compute it "
                    "inside the cell that reads it"
                )
            elif not (x.is_floating_point() or x.is_complex()):
                if x.numel() != 1:
                    raise RecordError(
                        f"{frame}: {what} reads `{label}`, an integer tensor of {x.numel()} elements; a node "
                        "carries one token id and one label: call it once per token"
                    )
                with torch._C.DisableTorchFunction():
                    v = int(x.reshape(()).item())
                if v < 0 or v > 0xFFFFFFFF:
                    raise RecordError(f"{frame}: {what} reads `{label}` = {v}: ids and labels are 0 .. 2^32-1")
                kinds.append(("data", tuple(x.shape), _dts(x.dtype)))
                data[i] = v
            else:
                raise RecordError(
                    f"{frame}: {what} reads `{label}`, a float tensor of shape {list(x.shape)} that no recorded call "
                    "made; batchlab records where every input comes from: look it up with an nn.Embedding "
                    "(an integer id), or compute it inside a cell"
                )
        return kinds, srcs, data

    # ------------------------------------------------------------ cells
    def _cell_call(self, role: str, mod: nn.Module, orig: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        frame = calls.here()
        what = f"cell `{role}`"
        sig = self.sigs[role]
        fast = None if kwargs or not all(self.is_tensor(a) for a in args) else sig.fast(len(args))
        if fast is not None:
            spec, skey, names_t = fast
            leaves, names, arg_names = list(args), list(names_t), names_t
        else:
            try:
                leaves, spec, names, arg_names = sig.flatten(args, kwargs)
            except TypeError as e:
                raise RecordError(f"{frame}: {what}: {e}") from None
            skey = spec_key(spec)
        kinds, srcs, data = self.classify(leaves, frame, what, names)
        key = ("cell", role, skey, tuple(kinds))
        kind = self.kinds.get(key)
        out_leaves, out_spec, kind = self._run_cell(
            kind, key, role, mod, orig, args, kwargs, leaves, kinds, names, frame
        )
        if kind.module == "":
            kind.module = self.paths[role]
            kind.arg_spec = spec
            kind.arg_names = arg_names
        self.kinds.put(kind)
        return self._add(kind, srcs, data, out_leaves, out_spec, leaves, frame, what)

    def _add(
        self, kind: Kind, srcs: list, data: dict, out_leaves: list, out_spec: Any, leaves: list, frame: str, what: str
    ) -> Any:
        inst = self.instance_of(srcs, frame, what)
        nid = self.graph.add(kind, srcs, list(data.values()), inst, self._depth == 0)
        return self._emit(nid, out_leaves, out_spec, leaves)

    # ------------------------------------------------------------ the mode
    def _on_call(self, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        name = calls.name_of(func)
        if not self._active:
            return func(*args, **kwargs)
        if self._in_cell:
            return self._inside_cell(func, name, args, kwargs)
        if calls.is_meta(name):
            return self._meta(func, name, args, kwargs)
        return self._free(func, name, args, kwargs)

    def _meta(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
        return func(*args, **kwargs)

    def _inside_cell(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
        return func(*args, **kwargs)

    def _plain(self, x: Any) -> bool:
        """Whether an argument can play no part in the graph: not a
        placeholder, not a tagged tensor, not a parameter, not an integer
        tensor (a token id or label)."""
        if type(x) in self.placeholders:
            return False
        if isinstance(x, torch.Tensor):
            return getattr(x, _TAG, None) is None and id(x) not in self.param_names and x.is_floating_point()
        if type(x) is list or type(x) is tuple:
            return all(self._plain(y) for y in x)
        return True

    def _free(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
        if all(self._plain(a) for a in args) and all(self._plain(a) for a in kwargs.values()):
            out = func(*args, **kwargs)
            if name in calls.ZEROS or (name in calls.CONSTANTS and _all_zero_floats(out)):
                for t in _tensors(out):
                    self.set_tag(t, ZERO)
            return out
        leaves, spec = flatten((args, kwargs))
        tags = [self.tag(x) for x in leaves]
        pending = next((t for t in tags if isinstance(t, LogSoftmaxOf)), None)
        if pending is not None:
            return self._read_log_softmax(pending, func, name, args, kwargs)
        if (
            calls.short(name) == "log_softmax"
            and args
            and _class_dim(args, kwargs)
            and isinstance(tags[0], (Src, Stack))
        ):
            return self._run_special(("tag", LogSoftmaxOf(args[0], str(calls.here()))), func, args, kwargs)
        recorded = any(isinstance(t, (Src, Stack)) for t in tags)
        ints = any(self.is_tensor(x) and t is None and not x.is_floating_point() for x, t in zip(leaves, tags))
        params = any(self.is_tensor(x) and id(x) in self.param_names for x in leaves)
        if not recorded and not (ints and params):
            derived = next((t for t in tags if isinstance(t, Derived)), None)
            if name in calls.ZEROS:
                return self._unrecorded(func, args, kwargs, ZERO)
            if params or derived is not None:
                where = derived.frame if derived is not None else str(calls.here())
                return self._unrecorded(func, args, kwargs, Derived(where))
            return self._unrecorded(func, args, kwargs, None)
        frame = calls.here()
        if calls.is_inplace(name):
            raise RecordError(
                f"{frame}: {name} changes a recorded value in place; write it out of place (h = h + x, not h += x)"
            )
        cat_dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) if name in calls.CATS else None
        if calls.rowwise(name, args, kwargs, between_cells=True) or (cat_dim is not None and cat_dim != 0):
            n = self._rows_of(leaves, tags)
            if n is not None:
                if cat_dim is not None:
                    stacks = [t for t in tags if isinstance(t, Stack)]
                    loose = any(self.is_tensor(x) and not isinstance(t, Stack) for x, t in zip(leaves, tags))
                    if loose or cat_dim < 0:
                        raise RecordError(f"{frame}: {name} along dim {cat_dim} of stacks and other tensors")
                    # Rows of torch.stack lost the dim the stack added.
                    shift = 0 if all(t.cat for t in stacks) else 1
                    args, kwargs = (list(args[0]),), {"dim": cat_dim - shift}
                elif name in calls.ROWWISE_LAST_DIM:  # each row's own last dim
                    args, kwargs = args[:1], {**kwargs, "dim": -1}
                return self._row_calls(func, name, args, kwargs, n, frame)
        plan = self._special(name, args, kwargs)
        if plan is not None:
            return self._do_special(plan, func, args, kwargs, frame)
        return self._op_call(func, name, args, kwargs, leaves, spec, frame)

    def _unrecorded(self, func: Callable[..., Any], args: tuple, kwargs: dict, tag: Any) -> Any:
        """A call between cells that reads no recorded value: zeros (an absent
        input), a tensor derived from parameters (an error where a node reads
        it), or a plain tensor."""
        out = func(*args, **kwargs)
        if tag is not None:
            for t in _tensors(out):
                self.set_tag(t, tag)
        return out

    def _read_log_softmax(
        self, ls: LogSoftmaxOf, func: Callable[..., Any], name: str, args: tuple, kwargs: dict
    ) -> Any:
        """A call reading a log_softmax made between cells: ``nll_loss`` of
        it is recorded as ``cross_entropy`` of its input (the same loss);
        anything else is an error naming both lines."""
        if calls.short(name) == "nll_loss" and args and self.tag(args[0]) is ls:
            ce = torch.nn.functional.cross_entropy
            return self._free(ce, calls.name_of(ce), (ls.x,) + tuple(args[1:]), kwargs)
        raise RecordError(
            f"{calls.user_frame()}: {name} reads the log_softmax made at {ls.frame}; batchlab has no log_softmax "
            "op: it records log_softmax only as the input of nll_loss (which is cross_entropy of the logits)"
        )

    def _rows_of(self, leaves: list, tags: list) -> int | None:
        """The number of rows of a row-wise call over stacks of recorded
        rows or integer vectors (all of one length), or None."""
        ns = set()
        for x, t in zip(leaves, tags):
            if isinstance(t, Stack):
                ns.add(len(t.items))
            elif t is None and self.is_tensor(x) and not x.is_floating_point() and len(x.shape) == 1 and x.shape[0] > 1:
                ns.add(int(x.shape[0]))
        if len(ns) > 1:
            raise RecordError(f"{calls.user_frame()}: a row-wise call over stacks of {sorted(ns)} rows")
        return ns.pop() if ns else None

    def _rows(self, x: Any, n: int) -> list | None:
        """The ``n`` rows of a stacked argument (a stack of recorded values,
        or an integer vector), each as that row's own value; None for an
        argument every row reads whole."""
        t = self.tag(x)
        if isinstance(t, Stack):
            return [self._row_value(x, i, t) for i in range(n)]
        if self.is_tensor(x) and t is None and not x.is_floating_point() and len(x.shape) == 1:
            with torch._C.DisableTorchFunction():
                return list(x.reshape(-1, 1).unbind())
        return None

    def _row(self, x: Any, i: int) -> Any:
        """Row ``i`` of a stacked argument, as that row's own value."""
        t = self.tag(x)
        if isinstance(t, Stack):
            return self._row_value(x, i, t)
        if self.is_tensor(x) and t is None and not x.is_floating_point() and len(x.shape) == 1:
            with torch._C.DisableTorchFunction():
                return x[i : i + 1]
        return x

    def _row_value(self, x: Any, i: int, t: Stack) -> Any:
        raise NotImplementedError

    def _row_calls(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict, n: int, frame: Any) -> Any:
        """The call once per row; the rows' results stacked again (a loss
        with reduction mean or sum: their mean or sum node)."""
        leaves, spec = flatten((args, kwargs))
        per = [self._rows(x, n) for x in leaves]  # each stacked argument's rows, once
        rows = self._row_results(func, name, leaves, spec, per, n)
        srcs = [self.tag(r) for r in rows]
        if not all(isinstance(s, Src) for s in srcs):
            raise RecordError(f"{frame}: {name} over a stack did not give one recorded value per row")
        reduction = kwargs.get("reduction", "mean") if calls.short(name) in ("cross_entropy", "nll_loss") else None
        if reduction in ("mean", "sum"):
            return self._reduce(reduction, srcs, tuple(rows[0].shape), func, args, kwargs, frame)
        return self._stacked(func, args, kwargs, rows, srcs)

    def _row_results(
        self, func: Callable[..., Any], name: str, leaves: list, spec: Any, per: list[list | None], n: int
    ) -> list:
        """The call on each row: the arguments' leaves with each stacked one
        (``per``) replaced by its row."""
        rows = []
        for i in range(n):
            ra, rk = unflatten([x if p is None else p[i] for x, p in zip(leaves, per)], spec)
            rows.append(self._free(func, name, ra, rk))
        return rows

    def _stacked(self, func: Callable[..., Any], args: tuple, kwargs: dict, rows: list, srcs: list[Src]) -> Any:
        raise NotImplementedError

    def _special(self, name: str, args: tuple, kwargs: dict) -> tuple | None:
        """The calls between cells that move recorded values without
        computing, as a plan: ``("alias", src)``, ``("sum", srcs, like)``,
        ``("mean", srcs, like)``, ``("stack", items, item_shape)``,
        ``("unbind", items)``, ``("zero",)``; ``None`` for an op node."""
        first = self.tag(args[0]) if args else None
        short = calls.short(name)
        if name in calls.ALIASES and isinstance(first, Src):
            if kwargs.get("training") or (short == "dropout" and len(args) > 2 and args[2] is True):
                raise RecordError(f"{calls.user_frame()}: dropout in training mode; record in eval mode (model.eval())")
            return ("alias", first)
        if short in ("add", "__add__", "__radd__") and len(args) == 2 and not kwargs:
            a, other = args
            ta, tb = first, self.tag(other)
            zero_b = tb is ZERO or (not self.is_tensor(other) and not isinstance(other, bool) and other == 0)
            if isinstance(ta, Src) and zero_b:
                return ("alias", ta)
            if ta is ZERO and isinstance(tb, Src):
                return ("alias", tb)
            if isinstance(ta, Src) and isinstance(tb, Src) and tuple(a.shape) == tuple(other.shape):
                return ("sum", [ta, tb], a)
            return None
        if name in ("torch.stack", "torch.cat", "torch.concat"):
            items = list(args[0])
            dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
            its = [self.tag(x) for x in items]
            if dim == 0 and items and all(isinstance(t, Src) or t is ZERO for t in its):
                shapes = {tuple(x.shape) for x in items}
                if len(shapes) == 1 and (name == "torch.stack" or next(iter(shapes))[:1] == (1,)):
                    items_ = [t if isinstance(t, Src) else None for t in its]
                    return ("stack", items_, next(iter(shapes)), name != "torch.stack")
            if any(isinstance(t, Stack) for t in its):
                raise RecordError(f"{calls.user_frame()}: {name} of a stack of recorded values")
            return None
        if isinstance(first, Stack):
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            if short in ("sum", "mean") and (
                dim in (0, (0,), [0]) or (dim is None and bl_shape(first.item_tshape) == (1,))
            ):
                # keepdim keeps a leading dim of 1 (emb(ids).sum(0, keepdim=True)): the same value.
                items = [s for s in first.items if s is not None]
                if not items:
                    return ("zero",)
                if short == "mean" and len(items) != len(first.items):
                    raise RecordError(f"{calls.user_frame()}: mean of a stack holding zeros")
                return (short, items, first.item_tshape)
            idx = args[1] if short == "__getitem__" else None
            if isinstance(idx, slice) and first.cat and idx.step in (None, 1):
                sel = range(len(first.items))[idx]
                if len(sel) == 1:  # embs[t : t + 1]: row t as it was
                    s = first.items[sel[0]]
                    return ("row", s) if s is not None else ("zero",)
            if short == "__getitem__" and isinstance(idx, int) and not first.cat:
                s = first.items[idx]
                return ("row", s) if s is not None else ("zero",)
            if short == "unbind" and dim in (None, 0):
                return ("unbind", first.items)
            raise RecordError(
                f"{calls.user_frame()}: {name} of a stack of recorded values; batchlab reads a stack only through "
                "sum(0), mean(0), an int index or unbind"
            )
        if short in ("sum", "mean") and isinstance(first, Src) and len(args) == 1 and not kwargs:
            if bl_shape(tuple(args[0].shape)) == (1,):
                return ("alias", first)
        if (short in calls.DIVS or short in calls.MULS) and len(args) == 2 and not kwargs:
            return self._scaled_sum(short in calls.DIVS, args)
        return None

    def _scaled_sum(self, div: bool, args: tuple) -> tuple | None:
        """``sum(xs) / len(xs)`` (or ``* (1 / k)``) of recorded values: the
        mean of the sum's terms, as inside a cell; ``x / 1`` is ``x``. The
        sums it replaces are dropped when nothing else reads them. Any other
        constant factor is left to the op's lowering (an error)."""
        x, c = args
        if not div and not isinstance(self.tag(x), Src):
            x, c = c, x
        src = self.tag(x)
        if not isinstance(src, Src) or isinstance(c, bool) or not isinstance(c, (int, float)) or c == 0:
            return None
        factor = 1.0 / c if div else float(c)
        if factor == 1.0:
            return ("alias", src)
        for terms, sums in (self._sum_terms(src, deep=True), self._sum_terms(src, deep=False)):
            if len(terms) >= 2 and abs(factor * len(terms) - 1.0) < 1e-9:
                self.graph.superseded.update(sums)
                return ("mean", terms, self.graph.kind_of(terms[0].node).out_tshapes[terms[0].k])
        return None

    def _sum_terms(self, src: Src, deep: bool) -> tuple[list[Src], list[int]]:
        """The values the sum node ``src`` adds (through the sums it reads
        when ``deep``: Python's ``sum`` is a chain of adds), and those sum
        nodes; ``([], [])`` when ``src`` is not a sum of recorded values."""
        if self.graph.kind_of(src.node).what != "sum":
            return [], []
        args = self.graph.args_of(src.node)
        if any(a is None for a in args):
            return [], []
        terms: list[Src] = []
        sums = [src.node]
        for a in args:
            sub, inner = self._sum_terms(a, deep) if deep else ([], [])
            terms += sub or [a]
            sums += inner
        return terms, sums

    def _do_special(self, plan: tuple, func: Callable[..., Any], args: tuple, kwargs: dict, frame: str) -> Any:
        what = plan[0]
        if what in ("sum", "mean"):
            items, like = plan[1], plan[2]
            shape = tuple(like.shape) if self.is_tensor(like) else tuple(like)
            return self._reduce(what, items, shape, func, args, kwargs, frame)
        return self._run_special(plan, func, args, kwargs)

    def _reduce(
        self,
        what: str,
        items: list[Src],
        item_shape: tuple[int, ...],
        func: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        frame: str,
    ) -> Any:
        out = self._run_special(("value",), func, args, kwargs)
        out_shape = tuple(out.shape)
        dtype = str(out.dtype)
        if what == "sum":
            key: tuple = ("sum", item_shape, dtype)
            leaves: tuple = (("tensor", item_shape, dtype),)
            names: tuple = ("x",)
        else:
            key = ("mean", len(items), item_shape, dtype)
            leaves = (("tensor", item_shape, dtype),) * len(items)
            names = tuple(f"x{i}" for i in range(len(items)))
        kind = self.kinds.get(key)
        if kind is None:
            kind = Kind(
                key=key, base=what, what=what, leaves=leaves, names=names, out_tshapes=(out_shape,), frame=str(frame)
            )
            self.kinds.put(kind)
        inst = self.instance_of(items, frame, f"a {what}")
        nid = self.graph.add(kind, list(items), [], inst, self._depth == 0)
        return self._emit(nid, [out], None, [])

    def _op_call(
        self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict, leaves: list, spec: Any, frame: str
    ) -> Any:
        names = [f"a{i}" for i in range(len(leaves))]
        kinds, srcs, data = self.classify(leaves, frame, name, names)
        key = ("op", name, spec_key(spec), tuple(kinds))
        kind = self.kinds.get(key)
        out_leaves, out_spec, kind = self._run_op(kind, key, func, name, args, kwargs, leaves, kinds, frame)
        kind.arg_spec = spec
        self.kinds.put(kind)
        return self._add(kind, srcs, data, out_leaves, out_spec, leaves, frame, name)

    @staticmethod
    def cell_kind(
        key: tuple, role: str, kinds: list, names: list, out_tshapes: tuple, out_spec: Any, frame: Any
    ) -> Kind:
        """The kind of a marked module's call (the recorder adds its tape)."""
        kind = Kind(
            key=key,
            base=role,
            what="cell",
            leaves=tuple(kinds),
            names=tuple(names),
            out_tshapes=tuple(out_tshapes),
            frame=str(frame),
        )
        kind.out_spec = out_spec
        return kind

    def op_kind(
        self,
        key: tuple,
        func: Callable[..., Any],
        name: str,
        kinds: list,
        out_tshapes: tuple,
        out_spec: Any,
        frame: Any,
    ) -> Kind:
        """The kind of a free torch call (the recorder adds its tape)."""
        kind = Kind(
            key=key,
            base=self.op_base(name, kinds),
            what="op",
            leaves=tuple(kinds),
            names=tuple(f"a{i}" for i in range(len(kinds))),
            out_tshapes=tuple(out_tshapes),
            func=func,
            frame=str(frame),
        )
        kind.out_spec = out_spec
        return kind

    @staticmethod
    def op_base(name: str, kinds: list[tuple]) -> str:
        """The role name of a free op: the function's short name, and the
        module owning the first parameter it reads (``linear.out``)."""
        owners = sorted({k[1].rsplit(".", 1)[0] for k in kinds if k[0] == "param" and "." in k[1]})
        return calls.short(name).strip("_") + ("." + owners[0] if owners else "")

    # ------------------------------------------------------------ subclass hooks
    def _run_cell(
        self,
        kind: Kind | None,
        key: tuple,
        role: str,
        mod: nn.Module,
        orig: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        leaves: list,
        kinds: list,
        names: list,
        frame: str,
    ) -> tuple[list, Any, Kind]:
        raise NotImplementedError

    def _run_op(
        self,
        kind: Kind | None,
        key: tuple,
        func: Callable[..., Any],
        name: str,
        args: tuple,
        kwargs: dict,
        leaves: list,
        kinds: list,
        frame: str,
    ) -> tuple[list, Any, Kind]:
        raise NotImplementedError

    def _run_special(self, plan: tuple, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        raise NotImplementedError

    def _emit(self, nid: int, out_leaves: list, out_spec: Any, inputs: list) -> Any:
        raise NotImplementedError


_DTS: dict[torch.dtype, str] = {}


def _dts(d: torch.dtype) -> str:
    s = _DTS.get(d)
    if s is None:
        s = _DTS[d] = str(d)
    return s


def _all_zero_floats(out: Any) -> bool:
    return isinstance(out, torch.Tensor) and out.is_floating_point() and not bool(out.any())


def _class_dim(args: tuple, kwargs: dict) -> bool:
    """Whether a ``log_softmax`` call runs over the class dim that
    ``nll_loss``/``cross_entropy`` use (dim 1, or dim 0 of a vector)."""
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    if not isinstance(dim, int) or len(args) > 2 or kwargs.get("dtype") is not None:
        return False
    n = len(args[0].shape)
    return n >= 1 and dim % n == (0 if n == 1 else 1)


def _map(x: Any, f: Callable[[Any], Any]) -> Any:
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        return type(x)(_map(i, f) for i in x)
    return f(x)


def _tensors(x: Any) -> list[torch.Tensor]:
    leaves, _ = flatten(x)
    return [t for t in leaves if isinstance(t, torch.Tensor)]
