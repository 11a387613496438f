"""Why DyNet's batch count differs from batchlab's: both agenda schedules,
simulated on the export's op graph, switching DyNet's rules to batchlab's one
at a time.

The simulation follows DyNet 2.2's autobatching engine
(``BatchedExecutionEngine::incremental_forward_no_update``, strategy 1):
nodes in creation order; a node's profile is its autobatch signature (0:
unbatchable); ready unbatchable nodes run first, one at a time, in the order
they became ready; otherwise the profile with the smallest average depth
(float32, over all its nodes) runs all its ready nodes, scanning profiles in
first-seen order and, on equal averages, taking the later profile unless it
is an ``affine`` or ``matmul`` (types after ``COMPLEX``). Parameter nodes and
input constants (zeros) are unbatchable leaves and are not counted.

DyNet's signatures that differ from batchlab's op types, for the ops of the
built-in cells: ``mean`` (``Average``) has none, so every mean runs alone;
``one_minus`` is two nodes, ``Negate`` then ``ConstantPlusX``; a cell's
``sum`` and a ``many`` port's sum are both ``Sum`` nodes (``dy.esum``) whose
signature is their argument count, without shapes, while batchlab types
``sum`` and ``port_sum`` apart, by shapes (``add`` is ``CwiseSum`` in both,
typed apart from ``Sum``); ``mul`` (``CwiseMultiply``) has no shape in its
signature. The simulation reproduces DyNet's profiler count exactly on every
workload checked (tests/test_explain.py, docs/peers.md).

Variants, each adding one of batchlab's rules to the previous one:

- ``dynet``: DyNet's rules (predicts DyNet's profiler count);
- ``+mean``: ``mean`` batchable, typed by shape;
- ``+one_minus``: ``one_minus`` one node;
- ``+sums``: a ``many`` port's sum and a cell's ``sum`` typed as batchlab
  types them (``port_sum`` by shape; ``sum`` by its arguments' shapes)
  instead of DyNet's ``Sum`` by argument count;
- ``+types``: every other op typed as batchlab types it too (op, role and
  parameters for ops reading parameters, argument shapes);
- ``+ties``: batchlab's agenda tie-break (exact averages; on a tie the type
  seen first) — which is batchlab's ``dynet --policy agenda``.
"""

import struct

VARIANTS = ("dynet", "+mean", "+one_minus", "+sums", "+types", "+ties")

# DyNet's node types below COMPLEX (simple) or above (affine, matmul): the tie rule.
COMPLEX_OPS = {"affine", "matmul"}


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def _ops(export, level):
    """The op nodes in DyNet's creation order: (key parts, args) per node,
    with parameter and zero leaves as key None."""
    one_minus_nodes = level < 2
    nodes = []  # (kind, dynet_sig, batchlab_type, args)
    leaf = {}

    def leaf_node(key):
        if key not in leaf:
            leaf[key] = len(nodes)
            nodes.append(("leaf", None, None, ()))
        return leaf[key]

    roles = export.roles
    # Parameter nodes: created per role before any op (DynetPeer.run_once).
    for ri, role in enumerate(roles):
        tables = {o["args"][0] for o in role["ops"] if o["op"] == "lookup"}
        for p in role["params"]:
            if p["name"] not in tables:
                leaf_node(("param", ri, p["name"]))
    outs = []
    for n in export.nodes:
        role = roles[n["role"]]
        ri = n["role"]
        vals, shapes = {}, {}
        for port, producers in zip(role["ports"], n["ports"]):
            for j, inp in enumerate(port["inputs"]):
                shapes[inp["name"]] = tuple(inp["shape"])
                if len(producers) == 1:
                    vals[inp["name"]] = outs[producers[0]][j]
                elif len(producers) >= 2:
                    args = tuple(outs[u][j] for u in producers)
                    bl_sum = ("port_sum", tuple(inp["shape"]))
                    dy_sum = ("sum", len(args)) if level < 3 else bl_sum
                    nodes.append(("op", dy_sum, bl_sum, args))
                    vals[inp["name"]] = len(nodes) - 1
                else:
                    vals[inp["name"]] = leaf_node(("zeros", tuple(inp["shape"])))
        params = {p["name"]: tuple(p["shape"]) for p in role["params"]}
        for o in role["ops"]:
            op = o["op"]
            args = []
            for a in o["args"]:
                if a in params:
                    continue
                args.append(vals[a])
            arg_shapes = tuple(params[a] if a in params else shapes[a] for a in o["args"])
            reads = tuple(a for a in o["args"] if a in params)
            bl = (op, ri if reads else None, reads, arg_shapes, tuple(o.get("slice") or ()))
            if not role["batchable"]:
                bl = ("unbatchable-role", ri) + bl
            if op == "affine":
                dy = ("affine", ri, reads, tuple(shapes[a] for a in o["args"][2::2]))
            elif op == "matmul":
                dy = ("matmul", ri, reads, arg_shapes[1:])
            elif op == "mul":
                dy = ("cmult",)
            elif op == "add":
                dy = ("csum",) + arg_shapes
            elif op == "sum":
                dy = ("sum", len(o["args"])) if level < 3 else bl
            elif op == "mean":
                dy = None if level < 1 else bl
            elif op == "lookup":
                dy = ("lookup", ri, reads)
            elif op == "pick_loss":
                dy = ("pnls", arg_shapes[0])
            elif op == "one_minus" and one_minus_nodes:
                nodes.append(("op", ("negate",), bl, tuple(args)))
                args = [len(nodes) - 1]
                dy = ("plus_const", 1.0)
            else:
                dy = (op,) + arg_shapes
            if level >= 4:
                dy = bl
            nodes.append(("op", dy, bl, tuple(args)))
            vals[o["out"]] = len(nodes) - 1
            shapes[o["out"]] = tuple(o["shape"])
        outs.append([vals[x] for x in role["outputs"]])
    return nodes


def simulate(export, variant):
    """Batches of the agenda schedule under ``variant`` (one of VARIANTS)."""
    level = VARIANTS.index(variant)
    nodes = _ops(export, level)
    n = len(nodes)
    depth = [0] * n
    left = [0] * n
    users = [[] for _ in range(n)]
    prof = [0] * n
    ids = {}
    kinds = [None]
    for i, (kind, dy, bl, args) in enumerate(nodes):
        d = 0
        for a in args:
            users[a].append(i)
            left[i] += 1
            d = max(d, depth[a] + 1)
        depth[i] = d
        key = None if kind == "leaf" else (bl if level >= 4 else dy)
        if key is not None:
            if key not in ids:
                ids[key] = len(ids) + 1
                kinds.append(key[0])
            prof[i] = ids[key]
    np_ = len(ids) + 1
    tot = [0] * np_
    cnt = [0] * np_
    for i in range(n):
        if prof[i]:
            tot[prof[i]] += depth[i]
            cnt[prof[i]] += 1
    avg = [f32(f32(tot[p]) / cnt[p]) if cnt[p] else 0.0 for p in range(np_)]
    active = [[] for _ in range(np_)]
    un = []
    for i in range(n):
        if left[i] == 0:
            (active[prof[i]] if prof[i] else un).append(i)
    batches = 0
    done = 0
    head = 0

    def finish(v):
        for u in users[v]:
            left[u] -= 1
            if left[u] == 0:
                (active[prof[u]] if prof[u] else un).append(u)

    while done < n:
        if head < len(un):
            v = un[head]
            head += 1
            if nodes[v][0] != "leaf":
                batches += 1
            done += 1
            finish(v)
            continue
        best = None
        for p in range(1, np_):
            if not active[p]:
                continue
            if best is None:
                best = p
                continue
            if level >= 5:
                # batchlab: smallest exact average, ties to the type seen first.
                if tot[p] * cnt[best] < tot[best] * cnt[p]:
                    best = p
            elif avg[best] > avg[p] or (avg[best] == avg[p] and kinds[p] not in COMPLEX_OPS):
                best = p
        if best is None:
            raise RuntimeError("simulation stuck: a cycle in the export?")
        batch = active[best]
        active[best] = []
        batches += 1
        done += len(batch)
        for v in batch:
            finish(v)
    return batches


def attribution(export):
    """Batches under every variant, in order."""
    return {v: simulate(export, v) for v in VARIANTS}
