"""The DGL peer (``dgl``): the export's model written the way DGL's users
write one, after DGL's own Tree-LSTM example (``examples/pytorch/tree_lstm``),
in DGL's own environment.

The cells come from the export's op lists. Affines that read the same values
are one ``F.linear``: their gate matrices stacked, the values side by side
(the example's ``U_iou`` over ``h_cat``, a node's children concatenated).
What does not depend on a message is computed for all of a role's nodes at
once before the propagation, as the example computes ``W_iou(embeds)`` for
every node before ``prop_nodes_topo``: the embedding lookups, the affine
terms that read them (an LSTM's ``W x + b``), a tree leaf's whole cell.

The DGL graph holds the cells that feed other cells (the tree, chain and
lattice nodes), not the lookups, nor the readout and loss cells that lead
only to the loss. A node's outputs, laid end to end, are its ``state``
(``ndata["state"]``, ``[nodes, 1, width]``); an edge's ``sel`` is the
one-hot of the port it feeds. The propagation is ``g.prop_nodes`` over
DGL's topological frontiers (``dgl.topological_nodes_generator``, as
``prop_nodes_topo`` does), one ``g.pull`` per frontier: DGL's builtin
``u_mul_e`` then ``sum`` place every producer's state at its port in one
fused sparse kernel, a ``many`` port's producers summed and an absent port
zeros (the export's binding), and the apply function runs each role's cell
on the role's rows of the frontier (the fused gates that read messages and
the elementwise ops). After it, each readout and loss role is one batched
call over all its nodes, as the example computes every node's logits after
``prop_nodes_topo``, and the loss is the loss nodes' sum.

Collate: the constructor, untimed, as the example builds its batched graph
in the data loader's collate function. It builds the fused parameters from
the export's, the DGL graph with its sparse formats and its edges' ``sel``
(nodes numbered frontier by frontier and role by role within one, so that
a role's rows of a frontier are one slice of what the apply function is
given), the frontiers, and per role its node rows, labels and the indices
that bind its inputs.

Timed per mini-batch (``run_once``): the lookups and everything computed
before the propagation, ``ndata["state"]`` set to zeros, the frontiers'
pulls (DGL's in-edge lookup, compute graph, kernel, apply function and
out-of-place frame writes), the readout and loss cells and the loss, and
when training the backward. Inference runs under ``torch.inference_mode()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import metadata

from . import codegen
from .export import Export
from .peers import PeerUnavailable, timed_step
from .program import Program

#: The row-wise PyTorch statement of each non-affine op (``F.linear``,
#: ``dim=1``), shared with the batched PyTorch peers.
ROWS = codegen.FORMATTERS["torch-rows"]


@dataclass
class Fused:
    """One ``F.linear`` standing for every affine of a stage that reads the
    same values: the gate matrices stacked by rows, each value's columns side
    by side (``blocks``: parameter, first row, first column, rows, columns),
    the biases stacked (``biases``: parameter, first row, rows)."""

    name: str
    values: list[tuple[str, int]]
    members: list[tuple[str, int, int, str | None]] = field(default_factory=list)
    blocks: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    biases: list[tuple[str, int, int]] = field(default_factory=list)
    rows: int = 0

    @property
    def cols(self) -> int:
        return sum(w for _, w in self.values)


@dataclass
class Stage:
    """One compiled part of a cell: ``source`` defines ``make(P)``, which
    returns the stage's function; the fused linears and the parameters used
    as they are (lookup tables, matmul operands) that ``P`` holds."""

    source: str
    fused: list[Fused]
    direct: set[str]


@dataclass
class Cell:
    """A role's cell in two stages. ``head(*bound, row, label)`` runs on all
    the role's nodes before the propagation (with no messages, the whole
    cell) and returns ``exports``; ``tail(ports, H, a, b, row, label)``, for
    a graph role, runs in a frontier's apply function on the role's rows
    ``a:b`` of the head's exports ``H`` and of ``ports`` and returns the
    cell's outputs."""

    head: Stage
    tail: Stage | None
    exports: list[str]
    bound: list[tuple[int, int, str]]  # (port, input j, name): the head's inputs


def compile_cell(role: dict, late: dict[str, tuple[int, int, int]] | None) -> Cell:
    """Splits ``role``'s cell where its messages arrive. For a graph role,
    ``late`` maps each input that is a message to its place in the reduced
    ``ports`` tensor (slot, first column, width), and every other input is
    bound before the propagation; an affine reading both kinds is split in
    two: its bias and the terms of inputs bound early go to the head, the
    message terms to the tail, which adds the head's part. For any other
    role (``late`` None) the head is the whole cell."""
    graph = late is not None
    late = late or {}
    where = f"role {role['role']} (cell {role['cell']})"
    params = {p["name"]: tuple(p["shape"]) for p in role["params"]}
    shapes = dict(params)
    ids = {name: codegen.ident("p_", name) for name in params}
    bound = []
    for p, port in enumerate(role["ports"]):
        for j, inp in enumerate(port["inputs"]):
            shapes[inp["name"]] = tuple(inp["shape"])
            ids[inp["name"]] = codegen.ident("v_", inp["name"])
            if inp["name"] not in late:
                bound.append((p, j, inp["name"]))
    is_late = {name: True for name in late}
    head, tail = [], []
    for o in role["ops"]:
        if o["op"] not in codegen.OPS:
            raise codegen.CodegenError(f"{where}: op {o['out']!r}: unknown op {o['op']!r}")
        for a in o["args"]:
            if a not in shapes:
                raise codegen.CodegenError(f"{where}: op {o['out']!r}: undefined operand {a!r}")
        out = o["out"]
        shapes[out] = tuple(o["shape"])
        ids[out] = codegen.ident("v_", out)
        if o["op"] != "affine":
            now_late = any(is_late.get(a, False) for a in o["args"])
            (tail if now_late else head).append(("op", o))
            is_late[out] = now_late
            continue
        bias, terms = o["args"][0], list(zip(o["args"][1::2], o["args"][2::2]))
        for w, x in terms:
            if x in params or len(shapes[x]) != 1 or shapes[w] != (shapes[out][0], shapes[x][0]):
                raise codegen.CodegenError(
                    f"{where}: affine {out!r}: {w} {list(shapes[w])} times {x} {list(shapes[x])} "
                    "is not a matrix times a vector of rows"
                )
        early = [(w, x) for w, x in terms if not is_late.get(x, False)]
        messages = [(w, x) for w, x in terms if is_late.get(x, False)]
        if not messages:
            head.append(("affine", out, bias, early, None))
        elif not early:
            tail.append(("affine", out, bias, messages, None))
        else:
            part = f"{out} before the propagation"
            shapes[part] = shapes[out]
            ids[part] = codegen.ident("e_", out)
            head.append(("affine", part, bias, early, None))
            tail.append(("affine", out, None, messages, part))
        is_late[out] = bool(messages)
    outputs = list(role["outputs"])
    for x in outputs:
        if x not in ids or x in params:
            raise codegen.CodegenError(f"{where}: output {x!r} is not defined")
    defined = [name for _, _, name in bound] + [it[1]["out"] if it[0] == "op" else it[1] for it in head]
    read = set()
    for it in tail:
        read.update(it[1]["args"] if it[0] == "op" else [x for _, x in it[3]] + ([it[4]] if it[4] else []))
    exports = [x for x in defined if x in read]
    exports += [x for x in outputs if x in defined and x not in exports]
    if not graph:
        exports = outputs
    head_stage = _stage(
        "head",
        head,
        shapes,
        ids,
        params,
        [ids[name] for _, _, name in bound] + ["row", "label"],
        [],
        [ids[x] for x in exports],
    )
    if not graph:
        return Cell(head_stage, None, exports, bound)
    # The tail reads its messages from the reduced ports and the head's
    # exports as views of its rows a:b.
    prologue = [f"{ids[x]} = H[{k}][a:b]" for k, x in enumerate(exports)]
    prologue += [f"{ids[name]} = ports[:, {q}, {off}:{off + w}]" for name, (q, off, w) in late.items()]
    if any(it[0] == "op" and it[1]["op"] in ("lookup", "pick_loss") for it in tail):
        prologue.append("row, label = row[a:b], label[a:b]")
    tail_stage = _stage(
        "tail", tail, shapes, ids, params, ["ports", "H", "a", "b", "row", "label"], prologue, [ids[x] for x in outputs]
    )
    return Cell(head_stage, tail_stage, exports, bound)


def _stage(kind, items, shapes, ids, params, args, prologue, returns) -> Stage:
    """The source of one stage: fused linears at their first member's place,
    the other ops as ``codegen``'s row-wise PyTorch statements."""
    groups: dict[tuple[str, ...], Fused] = {}
    for it in items:
        if it[0] != "affine":
            continue
        _, out, bias, terms, addend = it
        # Affines reading the same values (with multiplicity) share a
        # linear; a member's terms are matched to the columns in name order.
        terms = sorted(terms, key=lambda t: t[1])
        key = tuple(x for _, x in terms)
        g = groups.get(key)
        if g is None:
            g = groups[key] = Fused(f"{kind}{len(groups)}", [(x, shapes[x][0]) for x in key])
        rows = shapes[out][0]
        col = 0
        for w, x in terms:
            g.blocks.append((w, g.rows, col, rows, shapes[x][0]))
            col += shapes[x][0]
        if bias is not None:
            g.biases.append((bias, g.rows, rows))
        g.members.append((out, g.rows, rows, addend))
        g.rows += rows
    direct = set()
    param_ids = {ids[p] for p in params}
    lines = list(prologue)
    done = set()
    for it in items:
        if it[0] == "op":
            o = it[1]
            direct.update(a for a in o["args"] if a in params)
            rhs = ROWS(o["op"], [ids[a] for a in o["args"]], [list(shapes[a]) for a in o["args"]], o, param_ids)
            lines.append(f"{ids[o['out']]} = {rhs}")
            continue
        key = tuple(sorted(x for _, x in it[3]))
        g = groups[key]
        if g.name in done:
            continue
        done.add(g.name)
        t, bias = f"t_{g.name}", f"f_{g.name}_b"
        if not g.values:
            lines.append(f"{t} = {bias}.expand(row.shape[0], -1)")
        else:
            xs = [ids[x] for x, _ in g.values]
            x = xs[0] if len(xs) == 1 else f"torch.cat([{', '.join(xs)}], 1)"
            lines.append(f"{t} = F.linear({x}, f_{g.name}_W{', ' + bias if g.biases else ''})")
        for out, r0, rows, addend in g.members:
            rhs = t if len(g.members) == 1 else f"{t}[:, {r0}:{r0 + rows}]"
            lines.append(f"{ids[out]} = {rhs}{' + ' + ids[addend] if addend else ''}")
    fused = list(groups.values())
    binds = [f"    {ids[p]} = P[{ids[p]!r}]" for p in sorted(direct)]
    for g in fused:
        binds.append(f"    f_{g.name}_W = P['f_{g.name}_W']")
        if g.biases:
            binds.append(f"    f_{g.name}_b = P['f_{g.name}_b']")
    body = [f"        {line}" for line in lines] + [f"        return ({''.join(r + ', ' for r in returns)})"]
    source = "\n".join(["def make(P):", *binds, f"    def {kind}({', '.join(args)}):", *body, f"    return {kind}", ""])
    return Stage(source, fused, direct)


class DglPeer:
    """The export's model in DGL, after DGL's Tree-LSTM example (see the
    module docs)."""

    framework = "dgl"

    def __init__(self, export: Export, threads: int, train: bool = False):
        try:
            import dgl
            import dgl.function as fn
            import torch
        except Exception as e:
            raise PeerUnavailable(f"{type(e).__name__}: {e}") from None
        self.dgl, self.torch = dgl, torch
        torch.set_num_threads(threads)
        self.train = train
        self.name = "dgl"
        self.version = f"{metadata.version('dgl')} (torch {torch.__version__})"
        self.export = export
        # What the harness reports as the program's ops; the cells run here
        # are compiled below.
        self.program = Program(export, "torch-rows")
        self.message, self.reduce = fn.u_mul_e("state", "sel", "m"), fn.sum("m", "ports")
        self._stages()
        self._graph()
        self._cells()
        self._bindings()

    # --- collate: everything that depends on the mini-batch's graph alone

    def _stages(self):
        """Each role's stage: ``pre`` (no ports: a lookup, run before the
        propagation), ``post`` (every consumer is ``post``, from the loss
        nodes back: run after it, once per role, in ``post_order``) or
        ``graph`` (a cell feeding cells: a DGL graph node)."""
        roles, nodes = self.export.roles, self.export.nodes
        consumers = [set() for _ in roles]
        reads = [set() for _ in roles]
        for n in nodes:
            for producers in n["ports"]:
                for u in producers:
                    consumers[nodes[u]["role"]].add(n["role"])
                    reads[n["role"]].add(nodes[u]["role"])
        post = {nodes[v]["role"] for v in self.export.header["loss_nodes"]}
        grew = True
        while grew:
            grew = False
            for r, role in enumerate(roles):
                if r not in post and role["ports"] and r not in consumers[r] and consumers[r] <= post:
                    post.add(r)
                    grew = True
        for r in post:
            if not consumers[r] <= post:
                raise PeerUnavailable(
                    f"role {roles[r]['role']} feeds both the loss and other cells: "
                    "this peer computes the loss cells after the propagation"
                )
        order, left = [], set(post)
        while left:
            ready = sorted(r for r in left if not (reads[r] & left))
            if not ready:
                names = ", ".join(roles[r]["role"] for r in sorted(left))
                raise PeerUnavailable(f"the roles {names} read each other after the last cell: no DGL form here")
            order += ready
            left -= set(ready)
        self.stage = ["post" if r in post else "pre" if not role["ports"] else "graph" for r, role in enumerate(roles)]
        self.post_order = order

    def _graph(self):
        """The DGL graph of the ``graph`` stage's nodes, renumbered by
        frontier then role; which ports are messages; the state's layout;
        the frontiers and each one's role slices."""
        torch, dgl = self.torch, self.dgl
        roles, nodes = self.export.roles, self.export.nodes
        stage = [self.stage[n["role"]] for n in nodes]
        graph_roles = [r for r, s in enumerate(self.stage) if s == "graph"]
        gnodes = [v for v, s in enumerate(stage) if s == "graph"]
        # A graph role's port is a message if its producers are graph nodes,
        # else it is bound before the propagation; a port fed by both is not
        # expressed (its lookups would have to be graph nodes).
        kinds = {}
        for v in gnodes:
            n = nodes[v]
            for p, producers in enumerate(n["ports"]):
                kinds.setdefault((n["role"], p), set()).update(stage[u] for u in producers)
        self.late_ports = {}
        for r in graph_roles:
            late = []
            for p, port in enumerate(roles[r]["ports"]):
                k = kinds.get((r, p), set())
                if "graph" in k and len(k) > 1:
                    raise PeerUnavailable(
                        f"role {roles[r]['role']} port {port['name']} reads both cells and lookups: no DGL form here"
                    )
                if k == {"graph"}:
                    late.append(p)
            self.late_ports[r] = late
        # The state: output j of every graph role at the same columns.
        widths = []
        for r in graph_roles:
            for j, name in enumerate(roles[r]["outputs"]):
                shape = next(tuple(o["shape"]) for o in roles[r]["ops"] if o["out"] == name)
                if len(shape) != 1 or (j < len(widths) and widths[j] != shape[0]):
                    raise PeerUnavailable(
                        f"role {roles[r]['role']} output {name} {list(shape)}: the graph's node frame "
                        "holds one vector per output, the same for every cell"
                    )
                if j == len(widths):
                    widths.append(shape[0])
        self.offsets = [sum(widths[:j]) for j in range(len(widths))]
        self.widths = widths
        self.width = max(sum(widths), 1)
        self.slots = max([len(ps) for ps in self.late_ports.values()] + [1])
        for r in graph_roles:
            for p in self.late_ports[r]:
                for j, inp in enumerate(roles[r]["ports"][p]["inputs"]):
                    if j >= len(widths) or tuple(inp["shape"]) != (widths[j],):
                        raise PeerUnavailable(
                            f"role {roles[r]['role']} input {inp['name']} {inp['shape']} is not its producers' output {j}"
                        )
        # Frontiers of the graph in the export's order, then the nodes
        # renumbered by (frontier, role): DGL hands the apply function a
        # frontier's nodes in ascending id order, so each role's rows of it
        # are one slice, and, a role's nodes kept in graph id order, one
        # slice of the role's head values too.
        local = {v: i for i, v in enumerate(gnodes)}
        src, dst = [], []
        for v in gnodes:
            for p in self.late_ports[nodes[v]["role"]]:
                for u in nodes[v]["ports"][p]:
                    src.append(local[u])
                    dst.append(local[v])
        g0 = dgl.graph(
            (torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)), num_nodes=len(gnodes)
        )
        level = [0] * len(gnodes)
        for k, frontier in enumerate(dgl.topological_nodes_generator(g0) if gnodes else []):
            for i in frontier.tolist():
                level[i] = k
        order = sorted(range(len(gnodes)), key=lambda i: (level[i], nodes[gnodes[i]]["role"], i))
        self.gid = {gnodes[i]: new for new, i in enumerate(order)}
        # Edges in (consumer, port) order; `sel` is the one-hot of the port's slot.
        src, dst, slot = [], [], []
        for i in order:
            v = gnodes[i]
            for q, p in enumerate(self.late_ports[nodes[v]["role"]]):
                for u in nodes[v]["ports"][p]:
                    src.append(self.gid[u])
                    dst.append(self.gid[v])
                    slot.append(q)
        g = dgl.graph(
            (torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)), num_nodes=len(gnodes)
        )
        sel = torch.zeros(len(src), self.slots, 1)
        sel[torch.arange(len(src)), torch.tensor(slot, dtype=torch.int64)] = 1.0
        g.edata["sel"] = sel
        g.create_formats_()
        self.g = g
        self.frontiers = list(dgl.topological_nodes_generator(g)) if gnodes else []
        # Each role's nodes: graph roles by graph id, the others by node id.
        self.role_nodes = [[] for _ in roles]
        for v in sorted(range(len(nodes)), key=lambda v: (self.gid.get(v, -1), v)):
            self.role_nodes[nodes[v]["role"]].append(v)
        self.pos = {}
        for vs in self.role_nodes:
            self.pos.update((v, i) for i, v in enumerate(vs))
        role_of_gid = [0] * len(gnodes)
        for v, i in self.gid.items():
            role_of_gid[i] = nodes[v]["role"]
        gnode_of = {i: v for v, i in self.gid.items()}
        self.frontier_at, self.slices = {}, []
        start = 0
        for k, frontier in enumerate(self.frontiers):
            end = start + len(frontier)
            if not torch.equal(torch.sort(frontier).values, torch.arange(start, end)):
                raise RuntimeError(f"frontier {k} of the renumbered graph is not nodes {start}..{end - 1}")
            self.frontier_at[start] = k
            parts, s = [], start
            while s < end:
                r = role_of_gid[s]
                e = s
                while e < end and role_of_gid[e] == r:
                    e += 1
                parts.append((r, s - start, e - start, self.pos[gnode_of[s]]))
                s = e
            self.slices.append(parts)
            start = end
        self.rows = [torch.tensor([nodes[v]["row"] for v in vs], dtype=torch.int64) for vs in self.role_nodes]
        self.labels = [torch.tensor([nodes[v]["label"] for v in vs], dtype=torch.int64) for vs in self.role_nodes]

    def _cells(self):
        """Every role's cell compiled in stages, its fused and direct
        parameters as leaf tensors, and where each export parameter lies in
        them (for its gradient)."""
        torch, roles = self.torch, self.export.roles
        import numpy as np

        self.cells, self.heads, self.tails, self.leaves, self.places = [], [], [], [], []
        for r, role in enumerate(roles):
            late = None
            if self.stage[r] == "graph":
                late = {}
                for q, p in enumerate(self.late_ports[r]):
                    for j, inp in enumerate(role["ports"][p]["inputs"]):
                        late[inp["name"]] = (q, self.offsets[j], self.widths[j])
            cell = compile_cell(role, late)
            arrays = {p["name"]: self.export.param(p) for p in role["params"]}
            leaves, places = {}, {}
            for st in (cell.head, cell.tail):
                if st is None:
                    continue
                for name in st.direct:
                    key = codegen.ident("p_", name)
                    if key not in leaves:  # one leaf for both stages
                        leaves[key] = torch.from_numpy(arrays[name]).contiguous()
                        places.setdefault(name, []).append((key, None))
                for f in st.fused:
                    # A parameter used at two places is copied to both; its
                    # gradient is their sum.
                    w = np.zeros((f.rows, f.cols), np.float32)
                    for name, r0, c0, rows, cols in f.blocks:
                        w[r0 : r0 + rows, c0 : c0 + cols] = arrays[name]
                        places.setdefault(name, []).append((f"f_{f.name}_W", (r0, rows, c0, cols)))
                    leaves[f"f_{f.name}_W"] = torch.from_numpy(w)
                    if f.biases:
                        # Members without a bias (theirs went to the head)
                        # keep zeros.
                        b = np.zeros(f.rows, np.float32)
                        for name, r0, rows in f.biases:
                            b[r0 : r0 + rows] = arrays[name]
                            places.setdefault(name, []).append((f"f_{f.name}_b", (r0, rows, None, None)))
                        leaves[f"f_{f.name}_b"] = torch.from_numpy(b)
            for t in leaves.values():
                t.requires_grad_(self.train)
            namespace = {"torch": torch, "F": torch.nn.functional}
            self.heads.append(_make(cell.head, leaves, namespace, role, "head"))
            self.tails.append(_make(cell.tail, leaves, namespace, role, "tail") if cell.tail else None)
            self.cells.append(cell)
            self.leaves.append(leaves)
            self.places.append(places)

    def _bindings(self):
        """How each role's bound inputs are gathered: per (port, input j)
        from one table (``state``: the graph's, or a role's outputs) by
        index where every node has one producer; else a DGL block per
        table, summed (``copy_u_sum``: a ``many`` port's sum, zeros where a
        node has none)."""
        torch, dgl, nodes = self.torch, self.dgl, self.export.nodes

        def table_of(u):
            r = nodes[u]["role"]
            return ("state", self.gid[u]) if self.stage[r] == "graph" else (r, self.pos[u])

        self.binders = []
        for r, cell in enumerate(self.cells):
            vs, binders = self.role_nodes[r], []
            for p, j, name in cell.bound:
                width = next(i["shape"][0] for i in self.export.roles[r]["ports"][p]["inputs"] if i["name"] == name)
                sources = [[table_of(u) for u in nodes[v]["ports"][p]] for v in vs]
                tables = {t for srcs in sources for t, _ in srcs}
                if all(len(s) == 1 for s in sources) and len(tables) == 1:
                    idx = torch.tensor([s[0][1] for s in sources], dtype=torch.int64)
                    binders.append(("gather", tables.pop(), j, idx))
                elif not tables:
                    binders.append(("zeros", len(vs), width))
                else:
                    blocks = []
                    for t in sorted(tables, key=str):
                        edges = [(row, i) for i, srcs in enumerate(sources) for tt, row in srcs if tt == t]
                        n_src = self.g.num_nodes() if t == "state" else len(self.role_nodes[t])
                        block = dgl.create_block(
                            (
                                torch.tensor([e[0] for e in edges], dtype=torch.int64),
                                torch.tensor([e[1] for e in edges], dtype=torch.int64),
                            ),
                            num_src_nodes=n_src,
                            num_dst_nodes=len(vs),
                        )
                        block.create_formats_()
                        blocks.append((t, block))
                    binders.append(("sum", j, blocks))
            self.binders.append(binders)
        loss_at = {}
        for v in self.export.header["loss_nodes"]:
            loss_at.setdefault(nodes[v]["role"], []).append(self.pos[v])
        self.loss_at = [(r, torch.tensor(ix, dtype=torch.int64)) for r, ix in sorted(loss_at.items())]

    # --- timed: one mini-batch

    def _table(self, t, j, outs, state):
        if t == "state":
            return state[:, 0, self.offsets[j] : self.offsets[j] + self.widths[j]]
        return outs[t][j]

    def _bound(self, r, outs, state):
        """Role ``r``'s bound inputs, one tensor per input, a row per node."""
        args = []
        for b in self.binders[r]:
            if b[0] == "gather":
                args.append(self._table(b[1], b[2], outs, state).index_select(0, b[3]))
            elif b[0] == "zeros":
                args.append(self.torch.zeros(b[1], b[2]))
            else:
                parts = [self.dgl.ops.copy_u_sum(block, self._table(t, b[1], outs, state)) for t, block in b[2]]
                args.append(parts[0] if len(parts) == 1 else sum(parts[1:], parts[0]))
        return args

    def _forward(self):
        torch = self.torch
        outs, exports = {}, {}
        for want in ("pre", "graph"):
            for r, s in enumerate(self.stage):
                if s == want and self.role_nodes[r]:
                    got = self.heads[r](*self._bound(r, outs, None), self.rows[r], self.labels[r])
                    (outs if s == "pre" else exports)[r] = got
        state = None
        g = self.g
        if self.frontiers:
            g.ndata["state"] = torch.zeros(g.num_nodes(), 1, self.width)

            def apply(nodes):
                # The frontier is known by its first node (nodes come in
                # ascending id order); each role's cell runs on its slice.
                k = self.frontier_at[int(nodes.nodes()[0])]
                ports = nodes.data["ports"]
                parts = []
                for r, s, e, h in self.slices[k]:
                    out = self.tails[r](ports[s:e], exports[r], h, h + e - s, self.rows[r], self.labels[r])
                    x = out[0] if len(out) == 1 else torch.cat(out, 1)
                    if x.shape[1] < self.width:
                        x = torch.nn.functional.pad(x, (0, self.width - x.shape[1]))
                    parts.append(x.unsqueeze(1))
                return {"state": parts[0] if len(parts) == 1 else torch.cat(parts)}

            g.prop_nodes(self.frontiers, self.message, self.reduce, apply)
            state = g.ndata.pop("state")
        for r in self.post_order:
            if self.role_nodes[r]:
                outs[r] = self.heads[r](*self._bound(r, outs, state), self.rows[r], self.labels[r])
        terms = [outs[r][0].index_select(0, idx).sum() for r, idx in self.loss_at]
        return terms[0] if len(terms) == 1 else torch.stack(terms).sum()

    def run_once(self):
        return timed_step(self.torch, self._forward, self.train, self.leaves, len(self.frontiers))  # g.pull calls

    def gradients(self):
        """Per role and parameter: (role, spec, gradient array) of the last
        step, summed over the places the parameter has in the fused ones."""
        import numpy as np

        out = []
        for role, leaves, places in zip(self.export.roles, self.leaves, self.places):
            for spec in role["params"]:
                grad = np.zeros(spec["shape"], np.float32)
                for key, at in places.get(spec["name"], []):
                    g = leaves[key].grad
                    if g is None:
                        continue
                    if at is None:
                        grad += g.numpy()
                    elif at[2] is None:
                        grad += g[at[0] : at[0] + at[1]].numpy()
                    else:
                        grad += g[at[0] : at[0] + at[1], at[2] : at[2] + at[3]].numpy()
                out.append((role["role"], spec, grad))
        return out


def _make(stage, leaves, namespace, role, kind):
    """The stage's function, its parameters bound."""
    code = compile(stage.source, f"<batchlab_peers dgl {role['role']} {kind}>", "exec")
    scope = dict(namespace)
    exec(code, scope)
    return scope["make"](leaves)
