"""Writing a recording as a model folder (``docs/torch.md``, "The model folder").

::

    DIR/model.json            the manifest: roles, their cells, ports, losses, versions
    DIR/trace.json            the trace (docs/trace-format.md)
    DIR/cells/<role>.yaml     one cell per role (docs/cells.md)
    DIR/weights.safetensors   the parameters, under their names in the model
    DIR/expected.safetensors  PyTorch's own numbers: every node's outputs,
                              the loss, the gradients, one call per role op by op

The folder is written next to ``DIR`` and renamed into place, so a failed
or interrupted save leaves the previous folder (or none) intact.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import shutil
import signal
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

import torch

from .cell import Cell, Port, Val, bl_shape, clean_name
from .graph import Kind, Node, RecordError, feed_order
from .lower import DataIn, LoweringError, lower

if TYPE_CHECKING:
    from .record import Recorder

FORMAT = "batchlab-model"
VERSION = 1


def build_cell(kind: Kind, params: dict[str, tuple[int, ...]]) -> tuple[Cell, dict[str, str], list[list[int]]]:
    """The kind's cell with its final ports and output order. Returns the
    cell, the probe names (cell value -> fx node name) and the ports kept
    (positions per port; a port no op reads is dropped)."""
    cell = Cell(kind.role, doc=_doc(kind))
    pos = kind.tensor_positions
    vals: dict[int, Val] = {i: cell.input(kind.names[i], bl_shape(kind.leaves[i][1])) for i in pos}
    if kind.what == "sum":
        x = vals[pos[0]]
        cell.finish([cell.emit("sum", [x], x.shape, "total")])
        cell.ports = [Port("xs", "many", [x])]
        return cell, {}, kind.ports
    if kind.what == "mean":
        xs = [vals[p] for p in pos]
        # The mean of one value (a node with one parent) is that value: a
        # copy (batchlab's mean takes two or more).
        cell.finish([cell.emit("mean" if len(xs) > 1 else "sum", xs, xs[0].shape, "mean")])
        cell.ports = [Port(v.name, "one", [v]) for v in xs]
        return cell, {}, kind.ports
    inputs: dict[str, Any] = {}
    for i, leaf in enumerate(kind.leaves):
        if leaf[0] == "tensor":
            inputs[f"in{i}"] = vals[i]
        elif leaf[0] == "data":
            inputs[f"in{i}"] = DataIn(i)
    pvals: dict[str, Val] = {}
    for n in kind.tape.nodes:
        if n.op == "get_attr":
            pvals[n.target] = cell.param(n.target, params[n.target])
    try:
        lw = lower(kind.tape, cell, inputs, pvals, f"cell `{kind.role}`" if kind.what == "cell" else f"op {kind.base}")
    except LoweringError as e:
        raise RecordError(str(e)) from None
    cell.outputs = [cell.outputs[j] for j in kind.out_order]
    used = cell.used_inputs()
    ports: list[list[int]] = []
    for g, arity in zip(kind.ports, kind.arity):
        keep = list(g)
        while keep and id(vals[keep[-1]]) not in used:
            keep.pop()
        if not keep:
            continue  # nothing reads the port: the node does not depend on it
        for p in keep:
            if id(vals[p]) not in used:
                raise RecordError(
                    f"{kind.frame}: cell `{kind.base}` never reads its argument `{kind.names[p]}` but reads one "
                    "that comes after it from the same producer; batchlab binds a port to its producer's first outputs"
                )
        cell.ports.append(
            Port(vals[keep[0]].name if len(keep) == 1 else f"{vals[keep[0]].name}_port", arity, [vals[p] for p in keep])
        )
        ports.append(keep)
    probe: dict[str, str] = {}
    for v in cell.ports:
        for x in v.inputs:
            probe[x.name] = next(f"in{i}" for i in pos if vals[i] is x)
    for name, n in lw.origin.items():
        probe[name] = n.name
    return cell, probe, ports


def _doc(kind: Kind) -> str:
    if kind.what == "cell":
        return f"Recorded by batchlab_torch from module `{kind.module}`, first called at {kind.frame}."
    if kind.what == "op":
        return f"A free-standing op recorded by batchlab_torch: {kind.base}, first called at {kind.frame}."
    return f"A free-standing {kind.what} recorded by batchlab_torch, first at {kind.frame}."


def write_model(path: str, rec: Recorder) -> None:
    nodes = rec.graph.finish()
    if not nodes:
        raise RecordError("Recorder.save: nothing was recorded (call the model inside `with rec:`)")
    first: dict[int, Kind] = {}
    for n in nodes:
        first.setdefault(id(n.kind), n.kind)
    edges = {(id(nodes[a.node].kind), id(n.kind)) for n in nodes for a in n.args if a is not None}
    kinds = [first[k] for k in feed_order(list(first), edges)]
    params = {name: tuple(t.shape) for name, t in rec.params.items()}
    cells: dict[int, tuple[Cell, dict[str, str], list[list[int]]]] = {id(k): build_cell(k, params) for k in kinds}
    node_args = [_args(n, cells[id(n.kind)][2]) for n in nodes]
    roles = []
    for k in kinds:
        ports = cells[id(k)][2]
        feeders: list[set[str]] = [set() for _ in ports]
        for n, args in zip(nodes, node_args):
            if n.kind is not k:
                continue
            for pi, a in enumerate(args):
                feeders[pi].update(nodes[s].kind.role for s in a)
        roles.append(
            {
                "role": k.role,
                "cell": k.role,
                "type": k.type_name,
                "batchable": True,
                "loss": k.loss,
                "ports": [sorted(f) for f in feeders],
                "from": _origin(k),
            }
        )
    _check_binding(nodes, node_args, {r["role"]: r for r in roles}, cells)
    used_params = sorted({p for c, _, _ in cells.values() for p in c.params})
    hidden = _hidden(kinds)
    trace = _trace_text(rec, nodes, node_args, kinds, hidden)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "name": rec.name,
        "hidden": hidden,
        "instances": rec.instances,
        "nodes": len(nodes),
        "roles": roles,
        "files": {"trace": "trace.json", "weights": "weights.safetensors", "expected": "expected.safetensors"},
        "recorded_with": {
            "batchlab_torch": _version(),
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
    }
    weights = {p: _f32(rec.params[p]) for p in used_params}
    meta = {"format": FORMAT}
    expected = _expected(nodes, kinds, cells, rec, used_params, meta)
    _write_dir(
        path,
        {
            "model.json": json.dumps(manifest, indent=2).encode() + b"\n",
            "trace.json": trace.encode(),
            **{f"cells/{c.name}.yaml": c.yaml().encode() for c, _, _ in cells.values()},
        },
        {"weights.safetensors": (weights, {"format": FORMAT}), "expected.safetensors": (expected, meta)},
    )


def _origin(k: Kind) -> dict[str, str]:
    if k.what == "cell":
        return {"kind": "cell", "module": k.module, "at": k.frame}
    if k.what == "op":
        from .._calls import name_of

        return {"kind": "op", "op": name_of(k.func), "at": k.frame}
    return {"kind": k.what, "at": k.frame}


def _args(n: Node, ports: list[list[int]]) -> list[list[int]]:
    """Per kept port, the producer node ids bound to it (empty: absent)."""
    k = n.kind
    pos = k.tensor_positions
    if k.what == "sum":
        return [[a.node for a in n.args if a is not None]]
    out = []
    for g in ports:
        s = n.args[pos.index(g[0])]
        out.append([] if s is None else [s.node])
    return out


def _check_binding(nodes: list[Node], node_args: list[list[list[int]]], roles: dict[str, dict], cells: dict) -> None:
    """Binds every node's argument list as batchlab does (each argument to
    the first remaining port that accepts its producer's role,
    ``engine::workloads::bind_ports``) and refuses a recording where that
    picks another port than the call did."""
    for n, args in zip(nodes, node_args):
        feeders = roles[n.kind.role]["ports"]
        arity = [p.arity for p in cells[id(n.kind)][0].ports]
        bound: list[int] = [0] * len(arity)
        port = 0
        for want, producers in enumerate(args):
            for a in producers:
                role = nodes[a].kind.role
                while port < len(arity):
                    full = arity[port] != "many" and bound[port] > 0
                    if not full and role in feeders[port]:
                        break
                    port += 1
                if port != want:
                    raise RecordError(
                        f"{n.kind.frame}: `{n.kind.base}`: in one call the argument from `{role}` is its port {want}, "
                        f"but batchlab would bind it to port {port} (an optional argument left out before another "
                        "that the same cells feed); give the optional argument in every call"
                    )
                bound[port] += 1


def _hidden(kinds: list[Kind]) -> int:
    c: Counter[int] = Counter()
    for k in kinds:
        if k.what == "cell":
            for s in k.out_tshapes:
                b = bl_shape(s)
                if len(b) == 1 and b[0] > 1:
                    c[b[0]] += 1
    return c.most_common(1)[0][0] if c else 1


def _trace_text(
    rec: Recorder, nodes: list[Node], node_args: list[list[list[int]]], kinds: list[Kind], hidden: int
) -> str:
    tid = {id(k): i for i, k in enumerate(kinds)}
    has_data = any(n.data for n in nodes)
    lines = [
        "{",
        '  "format": "batchlab-trace",',
        f'  "version": {2 if has_data else 1},',
        f'  "workload": {json.dumps(rec.name)},',
        f'  "meta": {{"batch_size": {rec.instances}, "hidden": {hidden}, "dataset": "recorded", "level": "cell", '
        f'"recorded_by": "batchlab_torch {_version()}"}},',
        '  "types": [',
    ]
    lines += [
        f'    {{"name": {json.dumps(k.type_name)}, "batchable": true}}' + ("," if i + 1 < len(kinds) else "")
        for i, k in enumerate(kinds)
    ]
    lines += ["  ],", '  "nodes": [']
    for i, (n, args) in enumerate(zip(nodes, node_args)):
        flat = [a for p in args for a in p]
        parts = [f'"type": {tid[id(n.kind)]}', f'"args": [{", ".join(str(a) for a in flat)}]']
        if n.instance is not None:
            parts.append(f'"instance": {n.instance}')
        if n.data:
            parts.append('"data": {' + ", ".join(f'"{k}": {n.data[k]}' for k in ("id", "label") if k in n.data) + "}")
        lines.append("    {" + ", ".join(parts) + "}" + ("," if i + 1 < len(nodes) else ""))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def _f32(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float32).contiguous().clone()


def _expected(
    nodes: list[Node], kinds: list[Kind], cells: dict, rec: Recorder, used_params: list[str], meta: dict[str, str]
) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for k in kinds:
        mine = [n for n in nodes if n.kind is k]
        for j, tj in enumerate(k.out_order):
            shape = bl_shape(k.out_tshapes[tj])
            out[f"out/{k.role}/{j}"] = _f32(torch.stack([n.outputs[tj].reshape(shape) for n in mine]))
        cell, probe, _ = cells[id(k)]
        values = {v.name: v for p in cell.ports for v in p.inputs}
        values.update({op.out.name: op.out for op in cell.ops})
        if probe and k.first_node >= 0:
            meta[f"probe/{k.role}"] = str(k.first_node)
        for name, fx_name in probe.items():
            t = k.probe.get(fx_name)
            if t is not None and name in values and t.is_floating_point() and t.numel() == _numel(values[name].shape):
                out[f"probe/{k.role}/{name}"] = _f32(t.reshape(values[name].shape))
    seeds = [n for n in nodes if n.kind.loss]
    if seeds:
        total = sum(float(n.outputs[0].double().sum()) for n in seeds)
        out["loss"] = torch.tensor([total], dtype=torch.float32)
        raws = [n.raw for n in seeds]
        if all(r is not None for r in raws) and used_params:
            ps = [rec.params[p] for p in used_params]
            loss = torch.stack([r.reshape(()) for r in raws]).sum()
            grads = torch.autograd.grad(loss, ps, allow_unused=True, retain_graph=True)
            for p, g in zip(used_params, grads):
                out[f"grad/{p}"] = _f32(g if g is not None else torch.zeros_like(rec.params[p]))
    return out


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _version() -> str:
    from .. import __version__

    return __version__


def safetensors_bytes(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> bytes:
    """The safetensors file of f32 ``tensors``: names and metadata sorted,
    so the same tensors give the same bytes (the library's writer orders
    the metadata by hash)."""
    header: dict[str, Any] = {"__metadata__": dict(sorted(metadata.items()))} if metadata else {}
    blobs, at = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu", torch.float32).contiguous()
        data = t.numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(blobs)


@contextlib.contextmanager
def _terminate_as_exit() -> Any:
    """While a save runs, SIGTERM ends the process through Python's cleanup
    (``SystemExit``, status 143) rather than at once, so the half-written
    folder is removed as on SIGINT. A handler the user installed is kept."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _keep_users_files(old: str, new: str, own: set[str]) -> None:
    """Copies into ``new`` what the user put in the model folder ``old``
    beside the recording's own files (a policy, layouts, a report): a save
    replaces the recording, never the user's other files."""
    for name in os.listdir(old):
        if name in own:
            continue
        src, dst = os.path.join(old, name), os.path.join(new, name)
        if os.path.isdir(src) and not os.path.islink(src):
            shutil.copytree(src, dst, symlinks=True)
        else:
            shutil.copy2(src, dst, follow_symlinks=False)


def _write_dir(
    path: str, texts: dict[str, bytes], tensors: dict[str, tuple[dict[str, torch.Tensor], dict[str, str]]]
) -> None:
    """Writes the files into a sibling folder, then swaps it into ``path``.
    An existing ``path`` must be a model folder (it has ``model.json``) or
    empty: anything else is refused, never overwritten; the user's other
    files in a model folder are kept. A ``path`` that is a symbolic link
    stays one: its target is replaced. An interrupt (SIGINT, SIGTERM) leaves
    no temporary folder behind."""
    path = os.path.abspath(path)
    if os.path.islink(path):
        path = os.path.realpath(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise RecordError(f"{path}: exists and is not a folder; save into a new or a model folder")
        if os.listdir(path) and not os.path.isfile(os.path.join(path, "model.json")):
            raise RecordError(f"{path}: a folder that is not a model folder (no model.json); refusing to replace it")
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    own = {name.split("/")[0] for name in (*texts, *tensors)}
    old: str | None = None
    with _terminate_as_exit():
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(os.path.join(tmp, "cells"))
            for name, data in texts.items():
                with open(os.path.join(tmp, name), "wb") as f:
                    f.write(data)
            for name, (ts, meta) in tensors.items():
                with open(os.path.join(tmp, name), "wb") as f:
                    f.write(safetensors_bytes(ts, meta))
            if os.path.exists(path):
                _keep_users_files(path, tmp, own)
                old = os.path.join(parent, f".{os.path.basename(path)}.old-{os.getpid()}")
                os.rename(path, old)
            try:
                os.rename(tmp, path)
            except OSError as e:
                if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                raise RecordError(
                    f"{path}: another save made this folder while this one was writing; nothing was replaced: save again"
                ) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            if old is not None and not os.path.exists(path):
                os.rename(old, path)
            raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def clean(name: str) -> str:
    return clean_name(name)
