"""Recording a PyTorch model's own eager forward into a batchlab graph.

While a :class:`Recorder` is active, every call of a marked submodule (a
*cell*) becomes one node, and every torch call between cells that reads a
recorded value becomes a free-standing op node (a
``torch.overrides.TorchFunctionMode`` sees each one). Each recorded tensor
carries where it came from (:class:`~batchlab_torch.graph.Src`), so a node's
arguments are the nodes that produced its tensor inputs. The first call of
each kind of cell is also written down as a ``torch.fx`` graph and lowered
to batchlab's op set right away, so an op batchlab cannot express is an
error at the line that made it.
"""

from __future__ import annotations

import inspect
import itertools
import operator
from typing import Any, Callable, Mapping, Optional

import torch
import torch.fx as fx
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from . import calls
from .cell import Cell, Val, bl_shape
from .graph import Graph, Kind, RecordError, Src
from .lower import DataIn, LoweringError, lower, tshape

_TAG = "_batchlab_src"
_tokens = itertools.count(1)


class _Zero:
    """Tag of a tensor of zeros made between cells."""


class _Stack:
    """Tag of ``torch.stack``/``torch.cat`` of recorded values along dim 0."""

    def __init__(self, items: list[Optional[Src]], item_tshape: tuple[int, ...]) -> None:
        self.items = items
        self.item_tshape = item_tshape


class _Derived:
    """Tag of a tensor computed from parameters outside every cell."""

    def __init__(self, frame: str) -> None:
        self.frame = frame


ZERO = _Zero()


class _CellCall:
    """The cell call in progress: its kind's tape, when this is the first
    call of the kind, and the names of the torch calls it made."""

    def __init__(self, role: str, tracing: bool) -> None:
        self.role = role
        self.tracing = tracing
        self.graph = fx.Graph() if tracing else None
        self.vmap: dict[int, fx.Node] = {}
        self.keep: list[torch.Tensor] = []
        self.probe: dict[str, torch.Tensor] = {}
        self.names: list[str] = []


class _Mode(TorchFunctionMode):
    def __init__(self, rec: "Recorder") -> None:
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        return self.rec._on_call(func, args, kwargs or {})


def _flat_names(bound: Mapping[str, Any]) -> tuple[list[Any], Any, list[str]]:
    leaves, spec = tree_flatten(tuple(bound.values()))
    names: list[str] = []
    for pname, value in bound.items():
        sub, _ = tree_flatten(value)
        names += [pname] if len(sub) == 1 else [f"{pname}_{i}" for i in range(len(sub))]
    return leaves, spec, names


class Recorder:
    """Records the eager forward of ``model``; ``cells`` maps a role name to
    a submodule of ``model`` whose every call is one node.

    Each top-level call of ``model`` is one instance (sample). Use as a
    context manager around the user's own loop, then :meth:`save`::

        rec = bt.Recorder(model, cells={"leaf": model.leaf, "node": model.node})
        with rec:
            for sample in samples:
                model(sample)
        rec.save("out/my-model")
    """

    def __init__(self, model: nn.Module, cells: Mapping[str, nn.Module], *, name: Optional[str] = None) -> None:
        if not isinstance(model, nn.Module):
            raise RecordError(f"Recorder: model must be a torch.nn.Module, got {type(model).__name__}")
        if not cells:
            raise RecordError("Recorder: cells is empty; mark at least one submodule, e.g. cells={'node': model.node}")
        paths = {id(m): p for p, m in model.named_modules(remove_duplicate=False)}
        self.model = model
        self.name = name or _default_name(model)
        self.cells: dict[str, nn.Module] = {}
        self.paths: dict[str, str] = {}
        for role, mod in cells.items():
            if not isinstance(mod, nn.Module):
                raise RecordError(f"Recorder: cells[{role!r}] is a {type(mod).__name__}, not a torch.nn.Module")
            if mod is model:
                raise RecordError(f"Recorder: cells[{role!r}] is the model itself; mark its submodules")
            if id(mod) not in paths:
                raise RecordError(f"Recorder: cells[{role!r}] is not a submodule of the model")
            if any(m is mod for m in self.cells.values()):
                raise RecordError(f"Recorder: cells[{role!r}] marks a module already marked under another name")
            if not role or any(not (c.isalnum() or c in "_.-") for c in role) or not role.isascii():
                raise RecordError(f"Recorder: cell name {role!r}: use ASCII letters, digits, '_', '.', '-'")
            self.cells[role] = mod
            self.paths[role] = paths[id(mod)] or role
        self.param_names: dict[int, str] = {}
        for pname, p in model.named_parameters(remove_duplicate=False):
            self.param_names.setdefault(id(p), pname)
        self.params: dict[str, torch.Tensor] = {}
        self.graph = Graph()
        self._token = next(_tokens)
        self._mode: Optional[_Mode] = None
        self._cell: Optional[_CellCall] = None
        self._depth = 0
        self._instance = -1
        self._instances = 0
        self._active = False
        self._saved_forward: list[tuple[nn.Module, bool, Any]] = []
        self._sigs = {role: inspect.signature(mod.forward) for role, mod in self.cells.items()}

    # ------------------------------------------------------------ activation
    def __enter__(self) -> "Recorder":
        if self._active:
            raise RecordError("Recorder: already active")
        for role, mod in self.cells.items():
            self._patch(mod, self._cell_wrapper(role, mod, mod.forward))
        self._patch(self.model, self._root_wrapper(self.model.forward))
        self._mode = _Mode(self)
        self._mode.__enter__()
        self._active = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self._active = False
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        for mod, had, old in reversed(self._saved_forward):
            if had:
                mod.forward = old
            else:
                del mod.forward
        self._saved_forward.clear()
        self._cell = None
        self._depth = 0

    def _patch(self, mod: nn.Module, forward: Callable[..., Any]) -> None:
        had = "forward" in mod.__dict__
        self._saved_forward.append((mod, had, mod.__dict__.get("forward")))
        mod.forward = forward

    def _root_wrapper(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def forward(*args: Any, **kwargs: Any) -> Any:
            if self._depth == 0:
                self._instance = self._instances
                self._instances += 1
            self._depth += 1
            try:
                return orig(*args, **kwargs)
            finally:
                self._depth -= 1

        return forward

    def _cell_wrapper(self, role: str, mod: nn.Module, orig: Callable[..., Any]) -> Callable[..., Any]:
        def forward(*args: Any, **kwargs: Any) -> Any:
            if self._cell is not None or not self._active:
                return orig(*args, **kwargs)
            return self._cell_call(role, mod, orig, args, kwargs)

        return forward

    # ------------------------------------------------------------ tags
    def _tag(self, t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return None
        tag = getattr(t, _TAG, None)
        if tag is None or tag[0] != self._token:
            return None
        return tag[1]

    def _set(self, t: torch.Tensor, payload: Any) -> None:
        setattr(t, _TAG, (self._token, payload))

    def _now(self, srcs: list[Optional[Src]], frame: str, what: str) -> Optional[int]:
        """The instance of a node with arguments ``srcs``."""
        inst = {self.graph.nodes[s.node].instance for s in srcs if s is not None}
        inst.discard(None)
        if self._depth > 0:
            other = inst - {self._instance}
            if other:
                raise RecordError(
                    f"{frame}: {what} in sample {self._instance} reads a value recorded in sample {min(other)}: "
                    "batchlab's samples are independent (a value kept across calls of the model cannot be "
                    "expressed in the trace)"
                )
            return self._instance
        return inst.pop() if len(inst) == 1 else None

    # ------------------------------------------------------------ arguments
    def _classify(self, leaves: list[Any], frame: str, what: str, names: list[str]) -> tuple[list, list, dict, list]:
        """Per leaf: its kind entry, the tensor positions' sources, the
        integer data by position, and the params read."""
        kinds: list[tuple] = []
        srcs: list[Optional[Src]] = []
        data: dict[int, int] = {}
        for i, x in enumerate(leaves):
            if not isinstance(x, torch.Tensor):
                kinds.append(("static", _static(x)))
                continue
            pname = self.param_names.get(id(x))
            if pname is not None:
                self.params[pname] = x
                kinds.append(("param", pname))
                continue
            tag = self._tag(x)
            label = names[i] if i < len(names) else f"argument {i}"
            if isinstance(tag, Src):
                kinds.append(("tensor", tuple(x.shape), str(x.dtype)))
                srcs.append(tag)
            elif tag is ZERO:
                kinds.append(("tensor", tuple(x.shape), str(x.dtype)))
                srcs.append(None)
            elif isinstance(tag, _Stack):
                raise RecordError(
                    f"{frame}: {what} reads `{label}`, a stack of {len(tag.items)} recorded values; batchlab "
                    "records one value per argument: pass the values one by one, or sum them first"
                )
            elif isinstance(tag, _Derived):
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
                v = int(x.reshape(()).item())
                if v < 0 or v > 0xFFFFFFFF:
                    raise RecordError(f"{frame}: {what} reads `{label}` = {v}: ids and labels are 0 .. 2^32-1")
                kinds.append(("data", tuple(x.shape), str(x.dtype)))
                data[i] = v
            else:
                raise RecordError(
                    f"{frame}: {what} reads `{label}`, a float tensor of shape {list(x.shape)} that no recorded call "
                    "made; batchlab records where every input comes from: look it up with an nn.Embedding "
                    "(an integer id), or compute it inside a cell"
                )
        return kinds, srcs, data, []

    # ------------------------------------------------------------ cells
    def _cell_call(self, role: str, mod: nn.Module, orig: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        frame = calls.user_frame()
        what = f"cell `{role}`"
        try:
            bound = self._sigs[role].bind(*args, **kwargs)
        except TypeError as e:
            raise RecordError(f"{frame}: {what}: {e}") from None
        leaves, spec, names = _flat_names(bound.arguments)
        kinds, srcs, data, _ = self._classify(leaves, frame, what, names)
        key = ("cell", role, str(spec), tuple(kinds))
        kind = self.graph.kinds.get(key)
        call = _CellCall(role, kind is None)
        if call.tracing:
            assert call.graph is not None
            for i, (k, x) in enumerate(zip(kinds, leaves)):
                if k[0] in ("tensor", "data"):
                    n = call.graph.placeholder(f"in{i}")
                    n.meta["tshape"] = tuple(x.shape)
                    call.vmap[id(x)] = n
                    call.probe[n.name] = x.detach()
                elif k[0] == "param":
                    n = call.graph.get_attr(k[1])
                    n.meta["tshape"] = tuple(x.shape)
                    call.vmap[id(x)] = n
            call.keep.extend(x for x in leaves if isinstance(x, torch.Tensor))
        self._cell = call
        try:
            out = orig(*args, **kwargs)
        finally:
            self._cell = None
        out_leaves, out_spec = tree_flatten(out)
        for j, t in enumerate(out_leaves):
            if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                raise RecordError(f"{frame}: {what} returns {type(t).__name__} as output {j}; a cell returns float tensors")
        out_shapes = tuple(tuple(t.shape) for t in out_leaves)
        if kind is None:
            assert call.graph is not None
            outs = []
            for j, t in enumerate(out_leaves):
                n = call.vmap.get(id(t))
                if n is None:
                    raise RecordError(f"{frame}: {what}: output {j} is a tensor the cell neither got nor computed")
                outs.append(n)
            call.graph.output(tuple(outs))
            kind = Kind(
                key=key,
                base=role,
                what="cell",
                leaves=tuple(kinds),
                names=tuple(names),
                out_tshapes=out_shapes,
                module=self.paths[role],
                frame=frame,
                tape=call.graph,
                probe=call.probe,
            )
            kind.op_names = call.names
            kind.data_use = self._check_lowering(kind, f"cell `{role}` ({type(mod).__name__})")
            self.graph.kinds[key] = kind
        else:
            if call.names != kind.op_names:
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
        return self._add_node(kind, srcs, data, out_leaves, out_spec, leaves, frame, what)

    def _add_node(
        self, kind: Kind, srcs: list, data: dict, out_leaves: list, out_spec: Any, leaves: list, frame: str, what: str
    ) -> Any:
        use = getattr(kind, "data_use", {})
        node_data: dict[str, int] = {}
        for pos, v in data.items():
            k = use.get(pos)
            if k is None:
                continue
            node_data[k] = v
        inst = self._now(srcs, frame, what)
        nid = self.graph.add(kind, srcs, node_data, inst, [t.detach() for t in out_leaves])
        inputs = {id(x) for x in leaves if isinstance(x, torch.Tensor)}
        fresh = []
        for j, t in enumerate(out_leaves):
            if id(t) in inputs or self._tag(t) is not None:
                t = t.view_as(t)
            self._set(t, Src(nid, j))
            fresh.append(t)
            if t.numel() == 1 and t.requires_grad:
                self.graph.nodes[nid].raw = t
        return tree_unflatten(fresh, out_spec)

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
        params = {leaf[1]: cell.param(leaf[1], tuple(self.params[leaf[1]].shape)) for leaf in kind.leaves if leaf[0] == "param"}
        for n in kind.tape.nodes:
            if n.op == "get_attr" and n.target not in params:
                params[n.target] = cell.param(n.target, tuple(self.params[n.target].shape))
        try:
            lw = lower(kind.tape, cell, inputs, params, where)
        except LoweringError as e:
            raise RecordError(str(e)) from None
        used = cell.used_inputs()
        for i, leaf in enumerate(kind.leaves):
            if leaf[0] == "tensor" and id(inputs[f"in{i}"]) not in used and kind.what == "cell":
                pass  # checked once ports are known (Graph.finish)
        return dict(lw.data_use)

    # ------------------------------------------------------------ the mode
    def _on_call(self, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        name = calls.name_of(func)
        if calls.is_meta(name) or not self._active:
            return func(*args, **kwargs)
        if self._cell is not None:
            return self._in_cell(func, name, args, kwargs)
        return self._free(func, name, args, kwargs)

    def _in_cell(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
        call = self._cell
        assert call is not None
        call.names.append(name)
        if not call.tracing:
            return func(*args, **kwargs)
        assert call.graph is not None
        frame = calls.user_frame()

        def to_node(x: Any) -> Any:
            if not isinstance(x, torch.Tensor):
                return x
            n = call.vmap.get(id(x))
            if n is not None:
                return n
            pname = self.param_names.get(id(x))
            if pname is not None:
                self.params[pname] = x
                n = call.graph.get_attr(pname)
                n.meta["tshape"] = tuple(x.shape)
                call.vmap[id(x)] = n
                call.keep.append(x)
                return n
            raise RecordError(
                f"{frame}: cell `{call.role}` reads a tensor of shape {list(x.shape)} that is neither its argument, "
                "a parameter, nor computed in the cell (a buffer or a tensor from outside: pass it as an argument)"
            )

        fa = _map(args, to_node)
        fk = {k: _map(v, to_node) for k, v in kwargs.items()}
        out = func(*args, **kwargs)
        node = call.graph.call_function(func, fa, fk)
        node.meta["tshape"] = tshape(out)
        node.meta["frame"] = frame
        if isinstance(out, torch.Tensor):
            call.vmap[id(out)] = node
            call.keep.append(out)
            call.probe[node.name] = out.detach()
        elif isinstance(out, (tuple, list)):
            for i, t in enumerate(out):
                if isinstance(t, torch.Tensor):
                    g = call.graph.call_function(operator.getitem, (node, i))
                    g.meta["tshape"] = tuple(t.shape)
                    g.meta["frame"] = frame
                    call.vmap[id(t)] = g
                    call.keep.append(t)
                    call.probe[g.name] = t.detach()
        return out

    def _free(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
        leaves, spec = tree_flatten((args, kwargs))
        tags = [self._tag(x) for x in leaves]
        recorded = [t for t in tags if isinstance(t, (Src, _Stack))]
        ints = any(isinstance(x, torch.Tensor) and not x.is_floating_point() and t is None for x, t in zip(leaves, tags))
        reads_params = any(isinstance(x, torch.Tensor) and id(x) in self.param_names for x in leaves)
        if not recorded and not (ints and reads_params):
            params = any(isinstance(x, torch.Tensor) and id(x) in self.param_names for x in leaves)
            derived = next((t for t in tags if isinstance(t, _Derived)), None)
            out = func(*args, **kwargs)
            if name in calls.ZEROS:
                for t in _tensors(out):
                    self._set(t, ZERO)
            elif params or derived is not None:
                frame = derived.frame if derived is not None else calls.user_frame()
                for t in _tensors(out):
                    self._set(t, _Derived(frame))
            return out
        frame = calls.user_frame()
        if calls.is_inplace(name):
            raise RecordError(
                f"{frame}: {name} changes a recorded value in place; write it out of place (h = h + x, not h += x)"
            )
        special = self._special(func, name, args, kwargs, tags, frame)
        if special is not NotImplemented:
            return special
        return self._op(func, name, args, kwargs, leaves, spec, frame)

    def _special(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict, tags: list, frame: str) -> Any:
        """Calls between cells that move recorded values without computing:
        adds (sums), stacks and their reductions and indices, reshapes."""
        first = self._tag(args[0]) if args else None
        short = calls.short(name)
        if name in calls.ALIASES and isinstance(first, Src):
            if kwargs.get("training") or (short == "dropout" and len(args) > 2 and args[2] is True):
                raise RecordError(f"{frame}: dropout in training mode; record in eval mode (model.eval())")
            out = func(*args, **kwargs)
            if bl_shape(out.shape) != bl_shape(args[0].shape):
                return NotImplemented
            self._set(out, first)
            return out
        if short in ("add", "__add__", "__radd__") and len(args) == 2 and not kwargs:
            a, other = args
            ta, tb = self._tag(a), self._tag(other)
            zero_b = tb is ZERO or (not isinstance(other, torch.Tensor) and other == 0)
            if isinstance(ta, Src) and zero_b:
                out = func(*args, **kwargs)
                self._set(out, ta)
                return out
            if ta is ZERO and isinstance(tb, Src):
                out = func(*args, **kwargs)
                self._set(out, tb)
                return out
            if isinstance(ta, Src) and isinstance(tb, Src) and a.shape == other.shape:
                return self._sum([ta, tb], a, func(*args), frame)
        if name in ("torch.stack", "torch.cat", "torch.concat"):
            items = list(args[0])
            dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
            its = [self._tag(x) for x in items]
            if dim == 0 and all(isinstance(t, Src) or t is ZERO for t in its):
                shapes = {tuple(x.shape) for x in items}
                if len(shapes) == 1 and (name == "torch.stack" or next(iter(shapes))[:1] == (1,)):
                    out = func(*args, **kwargs)
                    self._set(out, _Stack([t if isinstance(t, Src) else None for t in its], next(iter(shapes))))
                    return out
            if any(isinstance(t, _Stack) for t in its):
                raise RecordError(f"{frame}: {name} of a stack of recorded values")
            return NotImplemented
        if isinstance(first, _Stack):
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            if short in ("sum", "mean") and (dim in (0, (0,), [0]) or (dim is None and bl_shape(first.item_tshape) == (1,))):
                if kwargs.get("keepdim"):
                    raise RecordError(f"{frame}: {name} with keepdim of a stack of recorded values")
                items = [s for s in first.items if s is not None]
                out = func(*args, **kwargs)
                if not items:
                    self._set(out, ZERO)
                    return out
                if short == "sum":
                    return self._sum(items, args[0][0], out, frame)
                if len(items) != len(first.items):
                    raise RecordError(f"{frame}: mean of a stack holding zeros")
                return self._mean(items, args[0][0], out, frame)
            if short == "__getitem__" and isinstance(args[1], int):
                out = func(*args, **kwargs)
                s = first.items[args[1]]
                self._set(out, s if s is not None else ZERO)
                return out
            if short == "unbind" and (dim in (None, 0)):
                out = func(*args, **kwargs)
                for t, s in zip(out, first.items):
                    self._set(t, s if s is not None else ZERO)
                return out
            raise RecordError(
                f"{frame}: {name} of a stack of recorded values; batchlab reads a stack only through "
                "sum(0), mean(0), an int index or unbind"
            )
        if short in ("sum", "mean") and isinstance(first, Src) and bl_shape(args[0].shape) == (1,) and len(args) == 1:
            out = func(*args, **kwargs)
            self._set(out, first)
            return out
        return NotImplemented

    def _sum(self, items: list[Src], like: torch.Tensor, out: torch.Tensor, frame: str) -> torch.Tensor:
        key = ("sum", tuple(like.shape), str(like.dtype))
        kind = self.graph.kinds.get(key)
        if kind is None:
            kind = Kind(
                key=key,
                base="sum",
                what="sum",
                leaves=(("tensor", tuple(like.shape), str(like.dtype)),),
                names=("x",),
                out_tshapes=(tuple(like.shape),),
                frame=frame,
            )
            self.graph.kinds[key] = kind
        # A sum has one (many) port: its arguments are the summed values.
        inst = self._now(items, frame, "a sum")
        nid = self.graph.add(kind, list(items), {}, inst, [out.detach()])
        self._set(out, Src(nid, 0))
        if out.numel() == 1 and out.requires_grad:
            self.graph.nodes[nid].raw = out
        return out

    def _mean(self, items: list[Src], like: torch.Tensor, out: torch.Tensor, frame: str) -> torch.Tensor:
        n = len(items)
        key = ("mean", n, tuple(like.shape), str(like.dtype))
        kind = self.graph.kinds.get(key)
        if kind is None:
            leaf = ("tensor", tuple(like.shape), str(like.dtype))
            kind = Kind(
                key=key,
                base="mean",
                what="mean",
                leaves=(leaf,) * n,
                names=tuple(f"x{i}" for i in range(n)),
                out_tshapes=(tuple(out.shape),),
                frame=frame,
            )
            self.graph.kinds[key] = kind
        inst = self._now(items, frame, "a mean")
        nid = self.graph.add(kind, list(items), {}, inst, [out.detach()])
        self._set(out, Src(nid, 0))
        if out.numel() == 1 and out.requires_grad:
            self.graph.nodes[nid].raw = out
        return out

    def _op(self, func: Callable[..., Any], name: str, args: tuple, kwargs: dict, leaves: list, spec: Any, frame: str) -> Any:
        what = f"{name}"
        names = [f"a{i}" for i in range(len(leaves))]
        kinds, srcs, data, _ = self._classify(leaves, frame, what, names)
        key = ("op", name, str(spec), tuple(kinds))
        kind = self.graph.kinds.get(key)
        out = func(*args, **kwargs)
        out_leaves, out_spec = tree_flatten(out)
        if not out_leaves or not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in out_leaves):
            raise RecordError(f"{frame}: {name} of recorded values returns other than float tensors")
        if kind is None:
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
            fa = _map(args, to_node)
            fk = {kk: _map(vv, to_node) for kk, vv in kwargs.items()}
            node = g.call_function(func, fa, fk)
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
            owners = sorted({k[1].rsplit(".", 1)[0] for k in kinds if k[0] == "param" and "." in k[1]})
            base = calls.short(name).strip("_") + ("." + owners[0] if owners else "")
            kind = Kind(
                key=key,
                base=base,
                what="op",
                leaves=tuple(kinds),
                names=tuple(names),
                out_tshapes=tuple(tuple(t.shape) for t in out_leaves),
                func=func,
                frame=frame,
                tape=g,
                probe=probe,
            )
            kind.data_use = self._check_lowering(kind, f"op {name}")
            self.graph.kinds[key] = kind
        return self._add_node(kind, srcs, data, out_leaves, out_spec, leaves, frame, name)

    # ------------------------------------------------------------ saving
    def save(self, path: str) -> None:
        """Writes the model folder (``docs/torch.md``) atomically: the trace,
        one cell per kind, the weights, PyTorch's outputs and gradients."""
        if self._active:
            raise RecordError("Recorder.save: call it after the `with` block")
        from .folder import write_model

        write_model(path, self)


def _tensors(x: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(x)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def _static(x: Any) -> str:
    if x is None or isinstance(x, (bool, int, float, str)):
        return repr(x)
    if isinstance(x, (torch.dtype, torch.device)):
        return str(x)
    if isinstance(x, slice):
        return f"slice({x.start},{x.stop},{x.step})"
    return f"<{type(x).__name__}>"


def _map(x: Any, f: Callable[[Any], Any]) -> Any:
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        return type(x)(_map(i, f) for i in x)
    if isinstance(x, dict):
        return {k: _map(v, f) for k, v in x.items()}
    return f(x)


def _default_name(model: nn.Module) -> str:
    n = type(model).__name__
    out = []
    for i, c in enumerate(n):
        if c.isupper() and i > 0 and not n[i - 1].isupper():
            out.append("-")
        out.append(c.lower())
    return "torch-" + ("".join(out) or "model")
