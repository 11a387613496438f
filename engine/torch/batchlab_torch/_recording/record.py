"""Recording a PyTorch model's own eager forward into a batchlab graph.

:class:`Recorder` runs every call for real (the user's code is unchanged)
and tags each recorded tensor with the node that made it. The first call of
each kind of cell or op is also written down as a ``torch.fx`` graph (its
torch calls, their shapes and source lines) and lowered to batchlab's op
set at once (:mod:`batchlab_torch.lower`), so an op batchlab cannot express
is an error at the line that made it; later calls of the kind must make the
same torch calls. :meth:`Recorder.save` writes the model folder.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from .. import _calls as calls
from .._flat import flatten as tree_flatten
from .._flat import unflatten as tree_unflatten
from .cell import Cell, bl_shape
from .graph import Kind, RecordError, Src
from .lower import DataIn, LoweringError, lower, tshape
from .tracer import ZERO, Stack, Tracer, check_name


class _Tape:
    """The cell call in progress: its fx graph when it is the first of its
    kind, and the names of the torch calls it makes."""

    def __init__(self, role: str, tracing: bool) -> None:
        self.role = role
        self.graph = fx.Graph() if tracing else None
        self.vmap: dict[int, fx.Node] = {}
        self.keep: list[torch.Tensor] = []
        self.probe: dict[str, torch.Tensor] = {}
        self.names: list[str] = []


class Recorder(Tracer):
    """Records the eager forward of ``model``; ``cells`` maps a role name to
    a submodule of ``model`` whose every call is one node. Each top-level
    call of ``model`` is one instance (sample)::

        rec = bt.Recorder(model, cells={"leaf": model.leaf, "node": model.node})
        with rec:
            for sample in samples:
                model(sample)
        rec.save("out/my-model")

    ``name`` names the model (the trace's workload); default ``torch-`` and
    the model's class name in kebab case.
    """

    keeps_values = True

    def __init__(self, model: nn.Module, cells: dict[str, nn.Module], *, name: str | None = None) -> None:
        # A folder's name, checked now rather than by the tools after the
        # save. (bt.run's discovery may run under a zoo workload's name: the
        # peers run a zoo trace's policy on it.)
        if name is not None:
            check_name(name, "Recorder")
        super().__init__(model, cells, name=name)
        self._tape: _Tape | None = None

    def __enter__(self) -> Recorder:
        super().__enter__()
        return self

    # ------------------------------------------------------------ cells
    def _run_cell(self, kind, key, role, mod, orig, args, kwargs, leaves, kinds, names, frame):  # type: ignore[no-untyped-def]
        tape = _Tape(role, kind is None)
        if tape.graph is not None:
            # One tensor at two argument positions (h = c = zeros) would be
            # one placeholder on the tape: each position gets its own copy.
            args, kwargs, leaves = _distinct(args, kwargs, leaves)
            for i, (k, x) in enumerate(zip(kinds, leaves)):
                if k[0] in ("tensor", "data"):
                    n = tape.graph.placeholder(f"in{i}")
                    n.meta["tshape"] = tuple(x.shape)
                    tape.vmap[id(x)] = n
                    tape.probe[n.name] = x.detach()
                elif k[0] == "param":
                    n = tape.graph.get_attr(k[1])
                    n.meta["tshape"] = tuple(x.shape)
                    tape.vmap[id(x)] = n
            tape.keep.extend(x for x in leaves if isinstance(x, torch.Tensor))
        self._tape, self._in_cell = tape, True
        try:
            out = orig(*args, **kwargs)
        finally:
            self._tape, self._in_cell = None, False
        what = f"cell `{role}`"
        out_leaves, out_spec = tree_flatten(out)
        for j, t in enumerate(out_leaves):
            if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                raise RecordError(
                    f"{frame}: {what} returns {type(t).__name__} as output {j}; a cell returns float tensors"
                )
        out_shapes = tuple(tuple(t.shape) for t in out_leaves)
        if kind is None:
            assert tape.graph is not None
            outs = []
            for j, t in enumerate(out_leaves):
                n = tape.vmap.get(id(t))
                if n is None:
                    raise RecordError(f"{frame}: {what}: output {j} is a tensor the cell neither got nor computed")
                outs.append(n)
            tape.graph.output(tuple(outs))
            kind = self.cell_kind(key, role, kinds, names, out_shapes, out_spec, frame)
            kind.tape, kind.probe = tape.graph, tape.probe
            kind.op_names = tape.names
            kind.data_use = self._check_lowering(kind, f"cell `{role}` ({type(mod).__name__})")
        else:
            if tape.names != kind.op_names:
                raise RecordError(
                    f"{frame}: {what} made other torch calls than on its first call with the same shapes "
                    f"({kind.frame}); a cell must compute the same ops for the same input shapes (no control "
                    "flow on tensor values)"
                )
            if out_shapes != kind.out_tshapes:
                raise RecordError(
                    f"{frame}: {what} returned shapes {[list(s) for s in out_shapes]} but "
                    f"{[list(s) for s in kind.out_tshapes]} on its first call with the same input shapes "
                    f"({kind.frame}); a cell's output shapes must follow from its input shapes"
                )
        return out_leaves, out_spec, kind

    def _meta(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
        """Metadata reads run as they are; a loop's ``loss.backward()`` on a
        recorded value keeps its graph (``retain_graph``): the folder's
        expected gradients are computed from the same graphs at save."""
        if name == "torch.Tensor.backward" and args and self.tag(args[0]) is not None:
            named = dict(zip(("gradient", "retain_graph", "create_graph", "inputs"), args[1:]))
            args, kwargs = args[:1], {**named, **kwargs, "retain_graph": True}
        return func(*args, **kwargs)

    def _inside_cell(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
        tape = self._tape
        assert tape is not None
        if calls.is_meta(name):
            return func(*args, **kwargs)
        tape.names.append(name)
        if tape.graph is None:
            return func(*args, **kwargs)
        frame = calls.user_frame()

        def to_node(x: Any) -> Any:
            if not isinstance(x, torch.Tensor):
                return x
            n = tape.vmap.get(id(x))
            if n is not None:
                return n
            pname = self.param_names.get(id(x))
            if pname is not None:
                self.params[pname] = x
                n = tape.graph.get_attr(pname)
                n.meta["tshape"] = tuple(x.shape)
                tape.vmap[id(x)] = n
                tape.keep.append(x)
                return n
            raise RecordError(
                f"{frame}: cell `{tape.role}` reads a tensor of shape {list(x.shape)} that is neither its argument, "
                "a parameter, nor computed in the cell (a buffer or a tensor from outside: pass it as an argument)"
            )

        fa = _map(args, to_node)
        fk = {k: _map(v, to_node) for k, v in kwargs.items()}
        out = func(*args, **kwargs)
        node = tape.graph.call_function(func, fa, fk)
        node.meta["tshape"] = tshape(out)
        node.meta["frame"] = frame
        if isinstance(out, torch.Tensor):
            tape.vmap[id(out)] = node
            tape.keep.append(out)
            tape.probe[node.name] = out.detach()
        elif isinstance(out, (tuple, list)):
            for i, t in enumerate(out):
                if isinstance(t, torch.Tensor):
                    g = tape.graph.call_function(operator.getitem, (node, i))
                    g.meta["tshape"] = tuple(t.shape)
                    g.meta["frame"] = frame
                    tape.vmap[id(t)] = g
                    tape.keep.append(t)
                    tape.probe[g.name] = t.detach()
        return out

    # ------------------------------------------------------------ ops
    def _run_op(self, kind, key, func, name, args, kwargs, leaves, kinds, frame):  # type: ignore[no-untyped-def]
        if kind is None:
            args, kwargs, leaves = _distinct(args, kwargs, leaves)
        out = func(*args, **kwargs)
        out_leaves, out_spec = tree_flatten(out)
        if not out_leaves or not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in out_leaves):
            raise RecordError(f"{frame}: {name} of recorded values returns other than float tensors")
        if kind is not None:
            return out_leaves, out_spec, kind
        g = fx.Graph()
        vmap: dict[int, fx.Node] = {}
        probe: dict[str, torch.Tensor] = {}
        for i, (k, x) in enumerate(zip(kinds, leaves)):
            if k[0] in ("tensor", "data"):
                n = g.placeholder(f"in{i}")
                n.meta["tshape"] = tuple(x.shape)
                vmap[id(x)] = n
                probe[n.name] = x.detach()
            elif k[0] == "param":
                n = g.get_attr(k[1])
                n.meta["tshape"] = tuple(x.shape)
                vmap[id(x)] = n
        to_node = lambda x: vmap.get(id(x), x) if isinstance(x, torch.Tensor) else x  # noqa: E731
        node = g.call_function(func, _map(args, to_node), {kk: _map(vv, to_node) for kk, vv in kwargs.items()})
        node.meta["tshape"] = tshape(out)
        node.meta["frame"] = frame
        outs = []
        if isinstance(out, torch.Tensor):
            outs.append(node)
            probe[node.name] = out.detach()
        else:
            for i, t in enumerate(out_leaves):
                gi = g.call_function(operator.getitem, (node, i))
                gi.meta["tshape"] = tuple(t.shape)
                outs.append(gi)
                probe[gi.name] = t.detach()
        g.output(tuple(outs))
        kind = self.op_kind(key, func, name, kinds, tuple(tuple(t.shape) for t in out_leaves), out_spec, frame)
        kind.tape, kind.probe = g, probe
        kind.data_use = self._check_lowering(kind, f"op {name}")
        return out_leaves, out_spec, kind

    def _run_special(self, plan: tuple, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        out = func(*args, **kwargs)
        what = plan[0]
        if what == "alias":
            if bl_shape(out.shape) != bl_shape(args[0].shape):
                raise RecordError(
                    f"{calls.user_frame()}: {calls.name_of(func)} changes a recorded value's shape from "
                    f"{list(args[0].shape)} to {list(out.shape)} between cells; batchlab keeps one shape per value"
                )
            self.set_tag(out, plan[1])
        elif what in ("row", "tag"):  # a row of a stack: that row's value; a pending log_softmax
            self.set_tag(out, plan[1])
        elif what == "stack":
            self.set_tag(out, Stack(plan[1], plan[2], plan[3]))
        elif what == "unbind":
            for t, s in zip(out, plan[1]):
                self.set_tag(t, s if s is not None else ZERO)
        elif what == "zero":
            self.set_tag(out, ZERO)
        return out

    def _row_value(self, x: Any, i: int, t: Stack) -> Any:
        with torch._C.DisableTorchFunction():
            row = x[i : i + 1] if t.cat else x[i]
        s = t.items[i]
        self.set_tag(row, s if s is not None else ZERO)
        return row

    def _stacked(self, func: Callable[..., Any], args: tuple, kwargs: dict, rows: list, srcs: list[Src]) -> Any:
        cat = tuple(rows[0].shape[:1]) == (1,)
        with torch._C.DisableTorchFunction():
            out = torch.cat(rows) if cat else torch.stack(rows)
        self.set_tag(out, Stack(list(srcs), tuple(rows[0].shape), cat))
        return out

    def _emit(self, nid: int, out_leaves: list, out_spec: Any, inputs: list) -> Any:
        g = self.graph
        g.outputs[nid] = [t.detach() for t in out_leaves]
        ids = {id(x) for x in inputs if isinstance(x, torch.Tensor)}
        fresh = []
        for j, t in enumerate(out_leaves):
            if id(t) in ids or self.tag(t) is not None:
                t = t.view_as(t)
            self.set_tag(t, Src(nid, j))
            fresh.append(t)
            if t.numel() == 1 and t.requires_grad:
                g.raw[nid] = t
        return fresh[0] if out_spec is None else tree_unflatten(fresh, out_spec)

    # ------------------------------------------------------------ lowering
    def _check_lowering(self, kind: Kind, where: str) -> dict[int, str]:
        """Lowers the kind's first call once, so that an op batchlab cannot
        express fails at its line now; returns which integer inputs are
        token ids and which are labels."""
        cell = Cell(kind.base)
        inputs: dict[str, Any] = {}
        for i, leaf in enumerate(kind.leaves):
            if leaf[0] == "tensor":
                inputs[f"in{i}"] = cell.input(kind.names[i], bl_shape(leaf[1]))
            elif leaf[0] == "data":
                inputs[f"in{i}"] = DataIn(i)
        params = {}
        for n in kind.tape.nodes:
            if n.op == "get_attr":
                params[n.target] = cell.param(n.target, tuple(self.params[n.target].shape))
        try:
            lw = lower(kind.tape, cell, inputs, params, where)
        except LoweringError as e:
            raise RecordError(str(e)) from None
        return dict(lw.data_use)

    # ------------------------------------------------------------ saving
    def save(self, path: str) -> None:
        """Writes the model folder (``docs/torch.md``) atomically: the trace,
        one cell per kind, the weights, PyTorch's outputs and gradients."""
        if self._active:
            raise RecordError("Recorder.save: call it after the `with` block")
        from .folder import write_model

        write_model(path, self)


def _distinct(args: tuple, kwargs: dict, leaves: list) -> tuple[tuple, dict, list]:
    """The call's arguments with a tensor met a second time replaced by a
    copy (kept alive by the returned leaves)."""
    seen: set[int] = set()
    copies: dict[int, list[torch.Tensor]] = {}

    def one(x: Any) -> Any:
        if not isinstance(x, torch.Tensor) or id(x) not in seen:
            if isinstance(x, torch.Tensor):
                seen.add(id(x))
            return x
        with torch._C.DisableTorchFunction():
            c = x.clone()
        tag = getattr(x, "_batchlab_src", None)
        if tag is not None:
            c._batchlab_src = tag
        copies.setdefault(id(x), []).append(c)
        return c

    new_args = _map(args, one)
    new_kwargs = {k: _map(v, one) for k, v in kwargs.items()}
    if not copies:
        return args, kwargs, leaves
    new_leaves, _ = tree_flatten((new_args, new_kwargs))
    return new_args, new_kwargs, new_leaves


def _map(x: Any, f: Callable[[Any], Any]) -> Any:
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        return type(x)(_map(i, f) for i in x)
    if isinstance(x, dict):
        return {k: _map(v, f) for k, v in x.items()}
    return f(x)
