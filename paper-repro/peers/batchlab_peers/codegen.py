"""Program text: every role's cell as a function of the peer framework.

Each cell op becomes one statement, in the cell's order, calling the
framework the way its users write such a cell (``dy.affine_transform`` for an
``affine``, ``torch.addmv`` for PyTorch...). A role's function takes the
port inputs in port order (input ``j`` of a port holds output ``j`` of its
producer; several producers on a ``many`` port arrive summed, none as zeros),
then the node's raw lookup ``row`` and ``label``, and returns the cell's
outputs. Parameters are bound once per graph by the factory ``make(P)``.

>>> role = {"role": "r", "cell": "c", "ports": [{"name": "x", "arity": "one",
...   "inputs": [{"name": "x", "shape": [4]}]}],
...   "params": [{"name": "b", "shape": [4]}],
...   "ops": [{"out": "y", "op": "add", "args": ["x", "b"], "shape": [4]}],
...   "outputs": ["y"]}
>>> print(role_source(role, 0, "torch").splitlines()[4])
        v_y = torch.add(v_x, p_b)
"""

import re

BACKENDS = ("dynet", "torch", "torch-rows")

#: Ops of ``docs/cells.md`` and, per backend, a formatter of one statement's
#: right-hand side from (args, op, shapes of the args).
OPS = (
    "matmul",
    "affine",
    "add",
    "sub",
    "mul",
    "sum",
    "mean",
    "sigmoid",
    "tanh",
    "relu",
    "gelu",
    "scale",
    "exp",
    "one_minus",
    "concat",
    "slice",
    "lookup",
    "softmax",
    "layer_norm",
    "pick_loss",
)


class CodegenError(Exception):
    """A cell the generator cannot express; the message names role and op."""


def ident(prefix, name):
    """A Python identifier for a cell name (cells allow `.` and `-`)."""
    return prefix + re.sub(r"[^0-9A-Za-z_]", "_", name)


def _dynet(op, a, shapes, spec):
    if op == "affine":
        return f"dy.affine_transform([{', '.join(a)}])"
    if op == "matmul":
        return f"{a[0]} * {a[1]}"
    if op == "add":
        return f"{a[0]} + {a[1]}"
    if op == "sub":
        return f"{a[0]} - {a[1]}"
    if op == "mul":
        return f"dy.cmult({a[0]}, {a[1]})"
    if op == "sum":
        return f"dy.esum([{', '.join(a)}])"
    if op == "mean":
        return f"dy.average([{', '.join(a)}])"
    if op == "sigmoid":
        return f"dy.logistic({a[0]})"
    if op == "tanh":
        return f"dy.tanh({a[0]})"
    if op == "relu":
        return f"dy.rectify({a[0]})"
    if op == "gelu":
        raise CodegenError("DyNet has no GELU (x Φ(x)); the cell runs in PyTorch and batchlab only")
    if op == "scale":
        # Not `c * x`: dynet38's bindings drop reflected operators.
        return f"{a[0]} * {float(spec['factor'])!r}"
    if op == "exp":
        return f"dy.exp({a[0]})"
    if op == "layer_norm":
        raise CodegenError("DyNet's layer_norm takes its gain and bias; batchlab's has none (they are mul and add)")
    if op == "one_minus":
        # dynet38's Cython bindings drop reflected operators (`1 - x` raises
        # TypeError), so 1 - x is Negate then ConstantPlusX: two DyNet nodes.
        return f"-{a[0]} + 1.0"
    if op == "concat":
        return f"dy.concatenate([{', '.join(a)}])"
    if op == "slice":
        start, length = spec["slice"]
        return f"dy.pick_range({a[0]}, {start}, {start + length})"
    if op == "lookup":
        return f"dy.lookup({a[0]}, row % {shapes[0][0]})"
    if op == "softmax":
        return f"dy.softmax({a[0]})"
    if op == "pick_loss":
        return f"dy.pickneglogsoftmax({a[0]}, label % {shapes[0][0]})"
    raise KeyError(op)


def _torch(op, a, shapes, spec):
    if op == "affine":
        if any(len(s) != 1 for s in shapes[2::2]):
            raise CodegenError("affine of matrix inputs is not expressed for torch")
        expr = a[0]
        for w, x in zip(a[1::2], a[2::2]):
            expr = f"torch.addmv({expr}, {w}, {x})"
        return expr
    if op == "matmul":
        return f"torch.matmul({a[0]}, {a[1]})"
    if op == "add":
        return f"torch.add({a[0]}, {a[1]})"
    if op == "sub":
        return f"torch.sub({a[0]}, {a[1]})"
    if op == "mul":
        return f"torch.mul({a[0]}, {a[1]})"
    if op == "sum":
        return " + ".join(a) if len(a) > 1 else f"{a[0]}.clone()"
    if op == "mean":
        return f"torch.stack([{', '.join(a)}]).mean(0)"
    if op == "sigmoid":
        return f"torch.sigmoid({a[0]})"
    if op == "tanh":
        return f"torch.tanh({a[0]})"
    if op == "relu":
        return f"torch.relu({a[0]})"
    if op == "gelu":
        return f"torch.nn.functional.gelu({a[0]})"
    if op == "scale":
        return f"{a[0]} * {float(spec['factor'])!r}"
    if op == "exp":
        return f"torch.exp({a[0]})"
    if op == "one_minus":
        return f"torch.rsub({a[0]}, 1.0)"
    if op == "concat":
        return f"torch.cat([{', '.join(a)}])"
    if op == "slice":
        start, length = spec["slice"]
        return f"{a[0]}[{start}:{start + length}]"
    if op == "lookup":
        return f"{a[0]}[row % {shapes[0][0]}]"
    if op == "softmax":
        return f"torch.softmax({a[0]}, 0)"
    if op == "layer_norm":
        return f"torch.nn.functional.layer_norm({a[0]}, ({shapes[0][0]},))"
    if op == "pick_loss":
        n = shapes[0][0]
        return f"torch.logsumexp({a[0]}, 0, keepdim=True) - {a[0]}[label % {n}:label % {n} + 1]"
    raise KeyError(op)


def _torch_rows(op, a, shapes, spec, params=()):
    """PyTorch on rows: every value has a leading dimension of rows, one per
    node of a batch (a node alone is one row), the way a practitioner writes
    a cell for mini-batches (``F.linear``, ``dim=1``); parameters have none."""
    if op == "affine":
        if any(len(s) != 1 for s in shapes[2::2]):
            raise CodegenError("affine of matrix inputs is not expressed for torch-rows")
        terms = [f"F.linear({a[2]}, {a[1]}, {a[0]})"]
        terms += [f"F.linear({x}, {w})" for w, x in zip(a[3::2], a[4::2])]
        return " + ".join(terms)
    if op == "matmul":
        x_is_param, y_is_param = a[0] in params, a[1] in params
        if len(shapes[1]) == 1 and len(shapes[0]) == 2:
            # matrix times vector: W x for a parameter W, else one product per row
            if x_is_param:
                return f"F.linear({a[1]}, {a[0]})"
            return f"torch.matmul({a[0]}, {a[1]}.unsqueeze(-1)).squeeze(-1)"
        if len(shapes[0]) == 2 and len(shapes[1]) == 2:
            return f"torch.matmul({a[0]}, {a[1]})"
        if len(shapes[0]) == 1 and len(shapes[1]) == 2:
            if y_is_param:
                return f"torch.matmul({a[0]}, {a[1]})"
            return f"torch.matmul({a[0]}.unsqueeze(-2), {a[1]}).squeeze(-2)"
        raise CodegenError(f"matmul of shapes {shapes[0]} and {shapes[1]} is not expressed for torch-rows")
    if op in ("add", "sub", "mul", "sigmoid", "tanh", "relu", "gelu", "scale", "exp", "one_minus", "sum", "mean"):
        return _torch(op, a, shapes, spec)
    if op == "concat":
        return f"torch.cat([{', '.join(a)}], 1)"
    if op == "slice":
        start, length = spec["slice"]
        return f"{a[0]}[:, {start}:{start + length}]"
    if op == "lookup":
        return f"{a[0]}[row % {shapes[0][0]}]"
    if op == "softmax":
        return f"torch.softmax({a[0]}, 1)"
    if op == "layer_norm":
        return f"torch.nn.functional.layer_norm({a[0]}, ({shapes[0][0]},))"
    if op == "pick_loss":
        n = shapes[0][0]
        return f"torch.logsumexp({a[0]}, 1, keepdim=True) - {a[0]}.gather(1, (label % {n}).unsqueeze(1))"
    raise KeyError(op)


FORMATTERS = {"dynet": _dynet, "torch": _torch, "torch-rows": _torch_rows}


def lookup_tables(role):
    """Names of the parameters read by `lookup` ops (DyNet's LookupParameters)."""
    tables = {o["args"][0] for o in role["ops"] if o["op"] == "lookup"}
    others = {a for o in role["ops"] if o["op"] != "lookup" for a in o["args"]}
    both = tables & others
    if both:
        raise CodegenError(f"role {role['role']}: parameter {sorted(both)[0]!r} is both a lookup table and an operand")
    return tables


def role_source(role, index, backend):
    """Python source of ``make_role_<index>(P)`` for ``backend``."""
    if backend not in FORMATTERS:
        raise CodegenError(f"unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    fmt = FORMATTERS[backend]
    where = f"role {role['role']} (cell {role['cell']})"
    names, shapes = {}, {}
    args = []
    for port in role["ports"]:
        for inp in port["inputs"]:
            names[inp["name"]] = ident("v_", inp["name"])
            shapes[inp["name"]] = inp["shape"]
            args.append(names[inp["name"]])
    lines = [
        f"def make_role_{index}(P):",
        f'    """{role["role"]} = cell {role["cell"]} ({backend}); generated from the cell IR."""',
    ]
    for p in role["params"]:
        names[p["name"]] = ident("p_", p["name"])
        shapes[p["name"]] = p["shape"]
        lines.append(f"    {names[p['name']]} = P[{p['name']!r}]")
    lines.append(f"    def run({', '.join(args + ['row', 'label'])}):")
    if backend == "torch-rows":
        # An input with no producer is None: zeros, a row per node.
        for port in role["ports"]:
            for inp in port["inputs"]:
                v = names[inp["name"]]
                shape = ", ".join(str(d) for d in inp["shape"])
                lines.append(f"        if {v} is None:")
                lines.append(f"            {v} = torch.zeros((row.shape[0], {shape}), device=row.device)")
    params = {names[p["name"]] for p in role["params"]}
    for o in role["ops"]:
        if o["op"] not in OPS:
            raise CodegenError(f"{where}: op {o['out']!r}: unknown op {o['op']!r}")
        try:
            a = [names[x] for x in o["args"]]
        except KeyError as e:
            raise CodegenError(f"{where}: op {o['out']!r}: undefined operand {e.args[0]!r}") from None
        arg_shapes = [shapes[x] for x in o["args"]]
        rhs = fmt(o["op"], a, arg_shapes, o, params) if backend == "torch-rows" else fmt(o["op"], a, arg_shapes, o)
        names[o["out"]] = ident("v_", o["out"])
        shapes[o["out"]] = o["shape"]
        lines.append(f"        {names[o['out']]} = {rhs}")
    try:
        outs = [names[x] for x in role["outputs"]]
    except KeyError as e:
        raise CodegenError(f"{where}: output {e.args[0]!r} is not defined") from None
    lines.append(f"        return ({', '.join(outs)},)")
    lines.append("    return run")
    return "\n".join(lines) + "\n"


HEADER = {
    "dynet": "import dynet as dy\n",
    "torch": "import torch\n",
    "torch-rows": "import torch\nimport torch.nn.functional as F\n",
}


def program_source(export, backend, imports=True):
    """The whole generated module for ``export`` (one factory per role);
    without ``imports``, the framework module is expected in the namespace
    the source runs in (``Program.factories``)."""
    head = (
        f"# Generated by batchlab_peers from {export.header['workload']} "
        f"h={export.header['hidden']} ({backend}); one statement per cell op.\n"
    )
    body = "\n\n".join(role_source(r, i, backend) for i, r in enumerate(export.roles))
    return head + (HEADER[backend] if imports else "") + "\n\n" + body


def program_ops(export):
    """Ops the generated program creates for the export's trace: every cell
    op of every node, plus one sum per input of a ``many`` port that has two
    or more producers (what ``engine record --level op`` expands to)."""
    per_role = [len(r["ops"]) for r in export.roles]
    ops = 0
    for n in export.nodes:
        ops += per_role[n["role"]]
        ports = export.roles[n["role"]]["ports"]
        for p, producers in enumerate(n["ports"]):
            if len(producers) >= 2:
                ops += len(ports[p]["inputs"])
    return ops


def two_node_ops(export, backend):
    """Ops that the backend's API spells as two nodes (DyNet's one_minus)."""
    if backend != "dynet":
        return 0
    per_role = [sum(1 for o in r["ops"] if o["op"] == "one_minus") for r in export.roles]
    return sum(per_role[n["role"]] for n in export.nodes)
