"""Small hand-made exports for the harness's tests (no engine needed)."""

import json
import struct

from batchlab_peers.export import Export, grad_tensor, param_tensor


def safetensors_bytes(table, data):
    """A safetensors file of header ``table`` (tensor entries and
    ``__metadata__``) and data section ``data``, as written: the JSON padded
    with spaces to a multiple of 8 bytes."""
    body = json.dumps(table).encode()
    body += b" " * (-len(body) % 8)
    return struct.pack("<Q", len(body)) + body + data


def to_bytes(header, tensors):
    """An export of ``header`` and ``tensors`` (name -> (shape, floats)),
    tensors in name order as batchlab writes them."""
    table, data = {"__metadata__": {"batchlab": json.dumps(header)}}, b""
    for name in sorted(tensors):
        shape, floats = tensors[name]
        raw = struct.pack(f"<{len(floats)}f", *floats)
        table[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return safetensors_bytes(table, data)


def split(raw):
    """The header table and the data section of a safetensors file."""
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def role(name, cell, ports, params, ops, outputs, batchable=True):
    return {
        "role": name,
        "cell": cell,
        "batchable": batchable,
        "ports": ports,
        "params": params,
        "ops": ops,
        "outputs": outputs,
    }


def chain_parts(n=3, h=2, extra_ops=(), gradients=False):
    """The header and tensors of a lookup per step feeding a chain of `step`
    cells (an optional `prev` port) whose outputs are summed by a `many`
    port at the end; ``gradients``: with a gradient per parameter."""
    tensors = {}

    def param(role, name, shape):
        numel = 1
        for d in shape:
            numel *= d
        tensors[param_tensor(role, name)] = (shape, [0.01 * (i + 1) for i in range(numel)])
        if gradients:
            tensors[grad_tensor(role, name)] = (shape, [-0.5 * (i + 1) for i in range(numel)])
        return {"name": name, "shape": shape}

    lookup = role(
        "embed",
        "lookup",
        [],
        [param("embed", "E", [10, h])],
        [{"out": "e", "op": "lookup", "args": ["E"], "shape": [h]}],
        ["e"],
    )
    step_params = [param("step", "b", [h]), param("step", "W", [h, h]), param("step", "U", [h, h])]
    ops = [
        {"out": "pre", "op": "affine", "args": ["b", "W", "x", "U", "hp"], "shape": [h]},
        {"out": "s", "op": "sigmoid", "args": ["pre"], "shape": [h]},
    ]
    last = "s"
    for k, op in enumerate(extra_ops):
        ops.append({"out": f"t{k}", "op": op, "args": [last], "shape": [h]})
        last = f"t{k}"
    ops.append({"out": "out", "op": "mul", "args": [last, "hp"], "shape": [h]})
    step = role(
        "step",
        "step",
        [
            {"name": "x", "arity": "one", "inputs": [{"name": "x", "shape": [h]}]},
            {"name": "prev", "arity": "optional", "inputs": [{"name": "hp", "shape": [h]}]},
        ],
        step_params,
        ops,
        ["out"],
    )
    total = role(
        "total",
        "total",
        [
            {"name": "all", "arity": "many", "inputs": [{"name": "l", "shape": [h]}]},
        ],
        [],
        [{"out": "t", "op": "sum", "args": ["l"], "shape": [h]}],
        ["t"],
        batchable=False,
    )
    nodes = []
    steps = []
    for i in range(n):
        nodes.append({"role": 0, "ports": [], "row": 3 * i, "label": 0})
        prev = [steps[-1]] if steps else []
        nodes.append({"role": 1, "ports": [[len(nodes) - 1], prev], "row": 0, "label": 0})
        steps.append(len(nodes) - 1)
    nodes.append({"role": 2, "ports": [steps], "row": 0, "label": 0})
    header = {
        "format": "batchlab-model-export",
        "version": 2,
        "workload": "synthetic-chain",
        "hidden": h,
        "seed": 1,
        "instances": 1,
        "op_nodes": n * (1 + len(ops)) + 2,
        "agenda_batches": 0,
        "agenda_by_op": {},
        "loss_nodes": [len(nodes) - 1],
        "reference_loss": None,
        "roles": [lookup, step, total],
        "nodes": nodes,
    }
    return header, tensors


def chain_export(**kw):
    """:func:`chain_parts` as a parsed export."""
    return Export.from_bytes(to_bytes(*chain_parts(**kw)), "synthetic.safetensors")
