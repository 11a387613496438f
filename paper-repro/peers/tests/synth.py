"""Small hand-made exports for the harness's tests (no engine needed)."""

import json
import struct

from batchlab_peers.export import Export, MAGIC


def to_bytes(header, floats):
    body = json.dumps(header).encode()
    while (16 + len(body)) % 64:
        body += b" "
    return MAGIC + struct.pack("<Q", len(body)) + body + struct.pack(f"<{len(floats)}f", *floats)


def role(name, cell, ports, params, ops, outputs, batchable=True):
    return {"role": name, "cell": cell, "batchable": batchable, "ports": ports,
            "params": params, "ops": ops, "outputs": outputs}


def chain_export(n=3, h=2, extra_ops=()):
    """A lookup per step feeding a chain of `step` cells (an optional
    `prev` port) whose outputs are summed by a `many` port at the end."""
    params, floats = [], []

    def param(name, shape):
        numel = 1
        for d in shape:
            numel *= d
        params.append({"name": name, "shape": shape, "offset": len(floats), "numel": numel})
        floats.extend(0.01 * (i + 1) for i in range(numel))
        return params[-1]

    lookup = role("embed", "lookup", [], [param("E", [10, h])],
                  [{"out": "e", "op": "lookup", "args": ["E"], "shape": [h]}], ["e"])
    params = []
    step_params = [param("b", [h]), param("W", [h, h]), param("U", [h, h])]
    ops = [
        {"out": "pre", "op": "affine", "args": ["b", "W", "x", "U", "hp"], "shape": [h]},
        {"out": "s", "op": "sigmoid", "args": ["pre"], "shape": [h]},
    ]
    last = "s"
    for k, op in enumerate(extra_ops):
        ops.append({"out": f"t{k}", "op": op, "args": [last], "shape": [h]})
        last = f"t{k}"
    ops.append({"out": "out", "op": "mul", "args": [last, "hp"], "shape": [h]})
    step = role("step", "step", [
        {"name": "x", "arity": "one", "inputs": [{"name": "x", "shape": [h]}]},
        {"name": "prev", "arity": "optional", "inputs": [{"name": "hp", "shape": [h]}]},
    ], step_params, ops, ["out"])
    params = []
    total = role("total", "total", [
        {"name": "all", "arity": "many", "inputs": [{"name": "l", "shape": [h]}]},
    ], [], [{"out": "t", "op": "sum", "args": ["l"], "shape": [h]}], ["t"], batchable=False)
    nodes = []
    steps = []
    for i in range(n):
        nodes.append({"role": 0, "ports": [], "row": 3 * i, "label": 0})
        prev = [steps[-1]] if steps else []
        nodes.append({"role": 1, "ports": [[len(nodes) - 1], prev], "row": 0, "label": 0})
        steps.append(len(nodes) - 1)
    nodes.append({"role": 2, "ports": [steps], "row": 0, "label": 0})
    header = {
        "format": "batchlab-model-export", "version": 1, "workload": "synthetic-chain",
        "hidden": h, "seed": 1, "instances": 1,
        "op_nodes": n * (1 + len(ops)) + 2, "agenda_batches": 0, "agenda_by_op": {},
        "loss_nodes": [len(nodes) - 1], "reference_loss": None,
        "data_floats": len(floats), "roles": [lookup, step, total], "nodes": nodes,
    }
    return Export.from_bytes(to_bytes(header, floats), "synthetic.blm")
