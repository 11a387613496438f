"""PyTorch by levels, written as its best users write it: the peer ``torch-levels``.

What a practitioner hand-writes for a Tree-LSTM (DGL's ``W_iou``/``U_iou``
model, ``engine/torch/batchlab_torch/examples/tree_lstm_levels.py``),
generated here from any export:

- **Fused gates.** Each role's ``affine`` ops that read the same inputs in
  the same order (a *gate group*: the LSTM's i, f, o, g all read ``x`` and
  ``h_prev``) are one product per input: the weights every gate applies to
  an input ``x`` are stacked into one matrix (``W_x``, one ``F.linear`` per
  role, input and level), the biases go with each group's first input, and
  a group's pre-activations are the sum of its slices of those products,
  split into the gates. The remaining ops of the cell run once on the
  level's rows (``codegen``'s row-wise ``torch-rows`` statements), a lookup
  as one ``F.embedding``, a ``pick_loss`` as ``F.cross_entropy(...,
  reduction="none")``. The stacked matrices are the model's parameters
  (leaves, as ``W_iou`` is); :meth:`LevelsPeer.gradients` hands each
  export parameter its slice of their gradients.
- **Levels.** Every node's level is its topological depth (0 without
  producers, else one more than its deepest producer). The roles whose
  every node feeds only the loss (the classifier and its loss, the
  tagger's MLP, the sum of the losses) are not run level by level: they
  run after the last level, once per role over all their nodes (their
  depth among themselves orders them), so every loss is computed once at
  the end and the total is the sum of the loss nodes' outputs. A level
  runs one call per role present in it.
- **State, inference.** Every output of every node that some node reads
  lives in a buffer allocated once at construction, with a row per node
  and a zero row for absent inputs; the outputs that one port input of a
  role reads share one (a Tree-LSTM's leaves' and internal nodes' ``h``
  are one buffer, ``c`` another, as in the hand-written program, the
  embeddings a third). A call's rows are consecutive, so its outputs are
  written in place with one ``narrow(...).copy_`` each, and every run
  overwrites them, under ``torch.inference_mode()``. A ``one`` or
  ``optional`` port's input is one ``index_select`` of its producers' rows
  (the zero row where a node has none), or a ``narrow`` (no copy) where
  they are consecutive; a ``many`` port's producers are summed by one
  ``index_add_`` into the call's rows.
- **State, training: per-level lists.** Every call's outputs are kept as
  they come, nothing is written in place, and an input is read from the
  calls that made it: a whole output (an LSTM's step reads the previous
  step's ``h`` and ``c`` as they are, as a practitioner's loop over
  ``nn.LSTMCell`` carries them), a ``narrow``, or an ``index_select``, one
  part per producing call, concatenated and put in the call's row order
  when there are several (a tree's children come from several levels).
  Why not the inference buffers with autograd: a write into a shared
  buffer and a gather from it each cost a whole buffer in the backward (a
  clone of its gradient, a zero-filled gradient to scatter into) at every
  level, 54 % of a training step on lstm-nmt at batch 64 hidden 64; the
  lists' backward touches only the rows read (1.11 to 1.63 times faster
  steps on the six workloads at batch 64, hidden 64). Views are safe here,
  as nothing they alias is written afterwards.
- **Absent inputs.** An input that no node of a call has is absent: its
  products are skipped and its other uses read zeros (one generated
  function per role and set of absent inputs).

**The collate step** (construction, untimed, once: the mini-batch's graph
is fixed, as a practitioner's data loader collates it before the model
runs): levels, the calls and their row order, every gather's and write's
row indices as tensors on the device, the lookup rows and labels reduced
to their tables' sizes, the stacked weights, the generated functions and,
for inference, the buffers.

**Timed per run** (``run_once``): every call in level order — the gathers,
the fused products, the cell's other ops, the in-place writes (inference)
— then the deferred loss roles, the total, and with ``--train`` the
backward of the total. No schedule is computed and nothing is collated in
it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import codegen
from .peers import open_torch, timed_step
from .program import Program

#: A gather: how one port input of a call is read. From the buffers
#: (inference): ``("none",)`` absent; ``("view", key, start, n)`` consecutive
#: rows; ``("index", key, rows)``; ``("sum", key, start, n)`` / ``("sumi",
#: key, rows)`` a single node's many producers; ``("seg", key, rows, seg,
#: n)`` several nodes' many producers, summed per node. From the per-level
#: lists (training): ``("list", parts, perm)``, ``("lsum", parts)``,
#: ``("lseg", parts, seg, n, shape)``, each part ``("all", call, j)``,
#: ``("narrow", call, j, start, n)``, ``("index", call, j, rows)`` or
#: ``("zeros", n, shape)``. :func:`collate` writes rows as lists and names a
#: buffer by its key; :class:`LevelsPeer` makes the rows index tensors, the
#: key the buffer's slot (and appends the input's shape to ``seg``).
Gather = tuple


@dataclass
class GateGroup:
    """Affine ops of one role that read the same inputs in the same order."""

    vars: tuple[str, ...]
    members: list[dict[str, Any]]
    widths: list[int]

    @property
    def width(self) -> int:
        return sum(self.widths)


@dataclass
class Stack:
    """The stacked weight of one input: every block of a gate group that
    reads it, its gates' weights for that input one under another, and their
    biases where the input is the group's first (its bias carrier)."""

    var: str
    offsets: dict[int, int] = field(default_factory=dict)  # group index -> first row
    weights: list[tuple[str, int, int]] = field(default_factory=list)  # (param, first row, rows)
    biases: list[tuple[str, int, int]] = field(default_factory=list)
    rows: int = 0


class FusedRole:
    """One role's cell with its gates fused (see the module docs): the plan,
    the stacked parameters and the generated level function per set of
    absent inputs."""

    def __init__(self, role: dict[str, Any], index: int) -> None:
        self.role = role
        self.index = index
        self.where = f"role {role['role']} (cell {role['cell']})"
        self.params = {p["name"]: tuple(p["shape"]) for p in role["params"]}
        self.inputs = [inp for port in role["ports"] for inp in port["inputs"]]
        self.shapes: dict[str, tuple[int, ...]] = {inp["name"]: tuple(inp["shape"]) for inp in self.inputs}
        self.shapes.update(self.params)
        for o in role["ops"]:
            self.shapes[o["out"]] = tuple(o["shape"])
        self.out_shapes = [self.shapes[name] for name in role["outputs"]]
        self.groups: list[GateGroup] = []
        self.group_of: dict[str, int] = {}
        by_vars: dict[tuple[str, ...], int] = {}
        for o in role["ops"]:
            if o["op"] != "affine" or not self._fusable(o):
                continue
            xs = tuple(o["args"][2::2])
            g = by_vars.get(xs)
            if g is None:
                g = by_vars[xs] = len(self.groups)
                self.groups.append(GateGroup(xs, [], []))
            self.groups[g].members.append(o)
            self.groups[g].widths.append(o["shape"][0])
            self.group_of[o["out"]] = g
        self.stacks: dict[str, Stack] = {}
        for g, group in enumerate(self.groups):
            for k, x in enumerate(group.vars):
                st = self.stacks.setdefault(x, Stack(x))
                st.offsets[g] = st.rows
                at = st.rows
                for o, w in zip(group.members, group.widths):
                    st.weights.append((o["args"][1 + 2 * k], at, w))
                    if k == 0:
                        st.biases.append((o["args"][0], at, w))
                    at += w
                st.rows = at
        # Parameters some op still reads whole (lookup tables, unfused ops).
        self.raw = sorted(
            {a for o in role["ops"] if o["out"] not in self.group_of for a in o["args"] if a in self.params}
        )
        self.row_mod = self._modulus("lookup")
        self.label_mod = self._modulus("pick_loss")
        self._made: dict[frozenset[str], Any] = {}

    def _fusable(self, o: dict[str, Any]) -> bool:
        """``b + sum W_k x_k`` with parameters b (a vector) and W_k (matrices)
        and distinct vector inputs x_k: its weights can be stacked."""
        a = o["args"]
        if len(a) < 3 or len(a) % 2 == 0 or len(self.params.get(a[0], ())) != 1:
            return False
        xs = a[2::2]
        if len(set(xs)) != len(xs):
            return False
        return all(len(self.params.get(w, ())) == 2 for w in a[1::2]) and all(
            x not in self.params and len(self.shapes.get(x, ())) == 1 for x in xs
        )

    def _modulus(self, op: str) -> int | None:
        """The table size every ``op`` (lookup, pick_loss) of the role reduces
        its row or label by, reduced once in the collate step; None when the
        role has none, or several sizes (the code reduces then)."""
        sizes = {self.shapes[o["args"][0]][0] for o in self.role["ops"] if o["op"] == op}
        return sizes.pop() if len(sizes) == 1 else None

    def leaves(self, torch: Any, params: dict[str, Any], train: bool) -> dict[str, Any]:
        """The role's parameters as the model holds them: ``W:<input>`` and
        ``b:<input>`` stacked per input, and the parameters still read whole
        under their own names."""
        out: dict[str, Any] = {}
        for x, st in self.stacks.items():
            out[f"W:{x}"] = torch.cat([params[w] for w, _, _ in st.weights]).contiguous()
            if st.biases:
                parts, at = [], 0
                for b, first, rows in st.biases:
                    if first > at:  # blocks whose group's bias another input carries
                        parts.append(torch.zeros(first - at, dtype=params[b].dtype, device=params[b].device))
                    parts.append(params[b])
                    at = first + rows
                if at < st.rows:
                    parts.append(torch.zeros(st.rows - at, dtype=parts[0].dtype, device=parts[0].device))
                out[f"b:{x}"] = torch.cat(parts).contiguous()
        for p in self.raw:
            out[p] = params[p].detach().clone()
        return {k: v.detach().requires_grad_(train) for k, v in out.items()}

    def sites(self) -> dict[str, list[tuple[str, int | None, int]]]:
        """Per export parameter, where the model holds it: (leaf, first row,
        rows), first row None for a whole leaf; its gradient is the sum."""
        out: dict[str, list[tuple[str, int | None, int]]] = {p: [] for p in self.params}
        for x, st in self.stacks.items():
            for w, first, rows in st.weights:
                out[w].append((f"W:{x}", first, rows))
            for b, first, rows in st.biases:
                out[b].append((f"b:{x}", first, rows))
        for p in self.raw:
            out[p].append((p, None, 0))
        return out

    def function(self, torch: Any, leaves: dict[str, Any], device: Any, absent: frozenset[str]) -> Any:
        """The level function for calls whose inputs ``absent`` no node has:
        ``run(*inputs, row, label, n)`` returning the outputs' rows."""
        fn = self._made.get(absent)
        if fn is None:
            src = self.source(absent)
            ns = {"torch": torch, "F": torch.nn.functional}
            exec(compile(src, f"<batchlab_peers torch-levels {self.role['role']}>", "exec"), ns)
            fn = self._made[absent] = ns[f"make_level_{self.index}"](leaves, device)
        return fn

    def source(self, absent: frozenset[str]) -> str:
        """Python source of ``make_level_<index>(P, device)`` for that set of
        absent inputs."""
        names: dict[str, str] = {}
        for inp in self.inputs:
            names[inp["name"]] = codegen.ident("v_", inp["name"])
        args = [names[inp["name"]] for inp in self.inputs]
        lines = [
            f"def make_level_{self.index}(P, device):",
            f'    """{self.role["role"]} = cell {self.role["cell"]}, a level\'s rows, gates fused;'
            f' absent: {", ".join(sorted(absent)) or "none"}."""',
        ]
        for p in self.raw:
            names[p] = codegen.ident("p_", p)
            lines.append(f"    {names[p]} = P[{p!r}]")
        lines.append(f"    def run({', '.join(args + ['row', 'label', 'n'])}):")
        body: list[str] = []
        # An absent input that an op other than a fused product reads is zeros.
        read = {a for o in self.role["ops"] if o["out"] not in self.group_of for a in o["args"]}
        read |= set(self.role["outputs"])
        for x in sorted(absent & read):
            shape = ", ".join(str(d) for d in self.shapes[x])
            body.append(f"{names[x]} = torch.zeros((n, {shape}), device=device)")
        done: set[int] = set()
        made_stacks: set[str] = set()
        params = {names[p] for p in self.raw}
        for o in self.role["ops"]:
            out = codegen.ident("v_", o["out"])
            g = self.group_of.get(o["out"])
            if g is not None:
                if g not in done:
                    done.add(g)
                    body += self._group(g, absent, names, made_stacks)
                continue
            try:
                a = [names[x] for x in o["args"]]
            except KeyError as e:
                raise codegen.CodegenError(f"{self.where}: op {o['out']!r}: undefined operand {e.args[0]!r}") from None
            shapes = [list(self.shapes[x]) for x in o["args"]]
            if o["op"] == "lookup":
                row = "row" if self.row_mod is not None else f"row % {shapes[0][0]}"
                rhs = f"F.embedding({row}, {a[0]})"
            elif o["op"] == "pick_loss":
                label = "label" if self.label_mod is not None else f"label % {shapes[0][0]}"
                rhs = f'F.cross_entropy({a[0]}, {label}, reduction="none").unsqueeze(1)'
            elif o["op"] == "sum" and len(a) == 1:
                rhs = a[0]  # a sum of one value is that value (codegen clones it)
            elif o["op"] in codegen.OPS:
                rhs = codegen.FORMATTERS["torch-rows"](o["op"], a, shapes, o, params)
            else:
                raise codegen.CodegenError(f"{self.where}: op {o['out']!r}: unknown op {o['op']!r}")
            names[o["out"]] = out
            body.append(f"{out} = {rhs}")
        try:
            outs = [names[x] for x in self.role["outputs"]]
        except KeyError as e:
            raise codegen.CodegenError(f"{self.where}: output {e.args[0]!r} is not defined") from None
        body.append(f"return ({', '.join(outs)},)")
        # The stacked weights this variant reads (an absent input's are not).
        used = set(re.findall(r"\bf[wb]_\w+", "\n".join(body)))
        for x, st in self.stacks.items():
            if codegen.ident("fw_", x) in used:
                lines.insert(-1, f"    {codegen.ident('fw_', x)} = P[{f'W:{x}'!r}]")
            if st.biases and codegen.ident("fb_", x) in used:
                lines.insert(-1, f"    {codegen.ident('fb_', x)} = P[{f'b:{x}'!r}]")
        lines += ["        " + b for b in body]
        lines.append("    return run")
        return "\n".join(lines) + "\n"

    def _group(self, g: int, absent: frozenset[str], names: dict[str, str], made: set[str]) -> list[str]:
        """Statements computing gate group ``g``: each present input's stacked
        product (once per role call), the group's slices of them summed, the
        sum split into the gates."""
        group = self.groups[g]
        body, terms = [], []
        w = group.width
        for x in group.vars:
            if x in absent:
                continue
            st = self.stacks[x]
            s = codegen.ident("s_", x)
            if x not in made:
                made.add(x)
                bias = f", {codegen.ident('fb_', x)}" if st.biases else ""
                body.append(f"{s} = F.linear({names[x]}, {codegen.ident('fw_', x)}{bias})")
            at = st.offsets[g]
            terms.append(s if st.rows == w else f"{s}[:, {at}:{at + w}]")
        carrier = group.vars[0]
        if carrier in absent:
            # Its product is skipped, the biases it carries are not.
            at = self.stacks[carrier].offsets[g]
            bias = f"{codegen.ident('fb_', carrier)}[{at}:{at + w}]"
            terms.append(bias if terms else f"{bias}.expand(n, {w})")
        pre = " + ".join(terms)
        outs = []
        for m in group.members:
            names[m["out"]] = codegen.ident("v_", m["out"])
            outs.append(names[m["out"]])
        if len(outs) == 1:
            body.append(f"{outs[0]} = {pre}")
        else:
            gv = f"g_{g}"
            body.append(f"{gv} = {pre}")
            # split_with_sizes: Tensor.split's Python wrapper costs more than
            # the split itself at small sizes.
            body.append(f"{', '.join(outs)}, = {gv}.split_with_sizes({list(group.widths)!r}, 1)")
        return body


@dataclass
class Call:
    """One role's call in a level: its level function, the gathers of its
    inputs, its rows and labels, and where its outputs go."""

    role: int
    nodes: list[int]
    absent: frozenset[str]
    gathers: list[Gather]
    row: Any
    label: Any
    writes: list[tuple[int, int, int]]  # (buffer slot, output index, first row)
    losses: Any  # None: no loss node; True: every node; else the loss nodes' positions (a tensor)
    lgathers: list[Gather] = field(default_factory=list)
    fn: Any = None


def collate(export: Any, roles: list[FusedRole]) -> tuple[list[dict[str, Any]], dict[tuple, int]]:
    """The mini-batch's calls in order (plain lists; :class:`LevelsPeer`
    turns their indices into tensors) and every buffer's rows (its zero row
    included)."""
    nodes = export.nodes
    n = len(nodes)
    role_of = [nd["role"] for nd in nodes]
    consumers: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for i, nd in enumerate(nodes):
        for p, producers in enumerate(nd["ports"]):
            for u in producers:
                consumers[u].append((i, p))
    loss_nodes = set(export.header["loss_nodes"])
    # Roles run after the last level: the loss nodes' and, repeatedly, those
    # whose every node feeds only such roles.
    deferred = {role_of[v] for v in loss_nodes}
    members: dict[int, list[int]] = {}
    for i, r in enumerate(role_of):
        members.setdefault(r, []).append(i)
    grew = True
    while grew:
        grew = False
        for r, vs in members.items():
            if r not in deferred and all(role_of[c] in deferred for u in vs for c, _ in consumers[u]):
                deferred.add(r)
                grew = True
    level = [0] * n
    top = -1
    for i, nd in enumerate(nodes):
        if role_of[i] not in deferred:
            level[i] = max((level[u] + 1 for ps in nd["ports"] for u in ps), default=0)
            top = max(top, level[i])
    tail = [0] * n
    for i, nd in enumerate(nodes):
        if role_of[i] in deferred:
            tail[i] = max((tail[u] + 1 for ps in nd["ports"] for u in ps if role_of[u] in deferred), default=0)
            level[i] = top + 1 + tail[i]
    # How many outputs of each node some consumer reads (a port input j reads output j).
    read_outs = [0] * n
    for u in range(n):
        for c, p in consumers[u]:
            k = len(export.roles[role_of[c]]["ports"][p]["inputs"])
            read_outs[u] = max(read_outs[u], k)
    # Which outputs share a buffer: those one port input of one role reads
    # (a tree's left child is a leaf or an internal node: one ``h``), and
    # no others, so that a buffer is no bigger than its readers need (a
    # training step's every write and gather costs its size in the backward).
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(x: tuple[int, int]) -> tuple[int, int]:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]  # halve the path
            x = parent[x]
        return x

    for r, vs in members.items():
        for p, port in enumerate(export.roles[r]["ports"]):
            for j in range(len(port["inputs"])):
                first = None
                for i in vs:
                    for u in nodes[i]["ports"][p]:
                        a = find((role_of[u], j))
                        if first is None:
                            first = a
                        elif a != first:
                            parent[a] = first

    def buffer(r: int, j: int) -> tuple:
        return (find((r, j)), roles[r].out_shapes[j])

    by_level: dict[tuple[int, int], list[int]] = {}
    for i in range(n):
        by_level.setdefault((level[i], role_of[i]), []).append(i)
    sizes: dict[tuple, int] = {}
    row_of: dict[tuple[int, int], int] = {}
    at: dict[int, tuple[int, int]] = {}  # node -> (its call, its row in the call)
    call_sizes: list[int] = []
    calls = []

    def pieces(flat: list[int | None], j: int, shape: tuple[int, ...]) -> tuple[list[tuple], list[int]]:
        """Rows of earlier calls' output ``j``, ``flat`` a node or None
        (zeros) per row, as parts to concatenate: zeros first, then each
        call's rows (the call's whole output, a narrow of it, or an
        index_select), and per concatenated row its position in ``flat``."""
        zeros = [k for k, u in enumerate(flat) if u is None]
        by_call: dict[int, list[int]] = {}
        for k, u in enumerate(flat):
            if u is not None:
                by_call.setdefault(at[u][0], []).append(k)
        parts: list[tuple] = [("zeros", len(zeros), shape)] if zeros else []
        order = list(zeros)
        for s in sorted(by_call):
            ks = by_call[s]
            local = [at[flat[k]][1] for k in ks]
            if local == list(range(call_sizes[s])):
                parts.append(("all", s, j))
            elif local == list(range(local[0], local[0] + len(local))):
                parts.append(("narrow", s, j, local[0], len(local)))
            else:
                parts.append(("index", s, j, local))
            order += ks
        return parts, order

    for lv, r in sorted(by_level):
        fr = roles[r]
        group = by_level[(lv, r)]

        def order(i: int) -> tuple:
            # Nodes in the order of their first producers' calls and rows: a
            # node reading the row after the one the node before it reads
            # lets that input be read without a copy.
            return (*(at[ps[0]] if ps else (-1, -1) for ps in nodes[i]["ports"]), i)

        group.sort(key=order)
        count = len(group)
        for k, i in enumerate(group):
            at[i] = (len(calls), k)
        lgathers: list[Gather] = []
        gathers: list[Gather] = []
        absent = set()
        for p, port in enumerate(fr.role["ports"]):
            for j, inp in enumerate(port["inputs"]):
                producers = [nodes[i]["ports"][p] for i in group]
                key = next((buffer(role_of[ps[0]], j) for ps in producers if ps), None)
                for ps in producers:
                    for u in ps:
                        if roles[role_of[u]].out_shapes[j] != tuple(inp["shape"]):
                            raise ValueError(
                                f"{export.path}: node {u} ({roles[role_of[u]].where}) output {j} has shape "
                                f"{list(roles[role_of[u]].out_shapes[j])}; its consumer's {inp['name']!r} is "
                                f"{inp['shape']}"
                            )
                shape = tuple(inp["shape"])
                if not any(producers):
                    absent.add(inp["name"])
                    gathers.append(("none",))
                    lgathers.append(("none",))
                elif max(len(ps) for ps in producers) <= 1:
                    parts, cat = pieces([ps[0] if ps else None for ps in producers], j, shape)
                    pos = [0] * count
                    for a, k in enumerate(cat):
                        pos[k] = a
                    lgathers.append(("list", parts, None if cat == list(range(count)) else pos))
                    rows = [row_of[(ps[0], j)] if ps else 0 for ps in producers]
                    if rows[0] > 0 and rows == list(range(rows[0], rows[0] + count)):
                        gathers.append(("view", key, rows[0], count))
                    else:
                        gathers.append(("index", key, rows))
                else:
                    seg = [k for k, ps in enumerate(producers) for _ in ps]
                    parts, cat = pieces([u for ps in producers for u in ps], j, shape)
                    if count == 1:
                        lgathers.append(("lsum", parts))
                    else:
                        lgathers.append(("lseg", parts, [seg[a] for a in cat], count, shape))
                    rows = [row_of[(u, j)] for ps in producers for u in ps]
                    if count == 1:
                        rows.sort()  # one sum: in row order, read without a copy where it can be
                        if rows == list(range(rows[0], rows[0] + len(rows))):
                            gathers.append(("sum", key, rows[0], len(rows)))
                        else:
                            gathers.append(("sumi", key, rows))
                    else:
                        gathers.append(("seg", key, rows, seg, count))
        writes = []
        outs = max(read_outs[i] for i in group)
        for j in range(outs):
            key = buffer(r, j)
            first = sizes.get(key, 1)  # row 0 is the zero row
            sizes[key] = first + count
            writes.append((key, j, first))
            for k, i in enumerate(group):
                row_of[(i, j)] = first + k
        in_loss = [k for k, i in enumerate(group) if i in loss_nodes]
        losses = None if not in_loss else True if len(in_loss) == count else in_loss
        row = [nodes[i]["row"] % fr.row_mod if fr.row_mod else nodes[i]["row"] for i in group]
        label = [nodes[i]["label"] % fr.label_mod if fr.label_mod else nodes[i]["label"] for i in group]
        calls.append(
            {
                "role": r,
                "nodes": group,
                "absent": frozenset(absent),
                "gathers": gathers,
                "lgathers": lgathers,
                "row": row,
                "label": label,
                "writes": writes,
                "losses": losses,
            }
        )
        call_sizes.append(count)
    return calls, sizes


class LevelsPeer:
    """PyTorch by levels with fused gates (``torch-levels``; the module docs
    say what it runs and what it times)."""

    framework = "torch"

    def __init__(
        self, export: Any, threads: int, train: bool = False, device: str = "cpu", lists: bool | None = None
    ) -> None:
        """``lists``: keep the state in per-level lists (True) or buffers
        (False); None, the module docs' choice (lists when training)."""
        torch, self.device, self.sync = open_torch(threads, device)
        self.torch = torch
        self.train = train
        self.name = "torch-levels"
        self.version = torch.__version__
        self.export = export
        # For the harness's op count (the export's cells, op for op).
        self.program = Program(export, "torch-rows")
        self.roles = [FusedRole(r, i) for i, r in enumerate(export.roles)]
        originals = [
            {p["name"]: torch.from_numpy(export.param(p)).to(self.device) for p in r["params"]} for r in export.roles
        ]
        self.leaves = [fr.leaves(torch, ps, train) for fr, ps in zip(self.roles, originals)]
        self.sites = [fr.sites() for fr in self.roles]
        plans, self.sizes = collate(export, self.roles)
        self.keys = sorted(self.sizes)
        slot = {k: s for s, k in enumerate(self.keys)}

        def index(rows: list[int]) -> Any:
            return torch.tensor(rows, dtype=torch.int64, device=self.device)

        self.calls: list[Call] = []
        for c in plans:
            gathers = []
            for g in c["gathers"]:
                kind = g[0]
                if kind == "view" and train:
                    # Training with buffers reads copies: a view of a buffer
                    # saved for the backward would be changed by the next
                    # level's write.
                    g = ("index", g[1], list(range(g[2], g[2] + g[3])))
                    kind = "index"
                if kind == "none":
                    gathers.append(g)
                elif kind in ("view", "sum"):
                    gathers.append((kind, slot[g[1]], g[2], g[3]))
                elif kind in ("index", "sumi"):
                    gathers.append((kind, slot[g[1]], index(g[2])))
                else:
                    gathers.append((kind, slot[g[1]], index(g[2]), index(g[3]), g[4], g[1][1]))
            r = c["role"]
            fr = self.roles[r]
            has_rows = any(o["op"] == "lookup" for o in fr.role["ops"])
            has_labels = any(o["op"] == "pick_loss" for o in fr.role["ops"])
            losses = c["losses"]
            call = Call(
                role=r,
                nodes=c["nodes"],
                absent=c["absent"],
                gathers=gathers,
                row=index(c["row"]) if has_rows else None,
                label=index(c["label"]) if has_labels else None,
                writes=[(slot[k], j, first) for k, j, first in c["writes"]],
                losses=losses if losses is None or losses is True else index(losses),
            )
            for g in c["lgathers"]:
                if g[0] == "none":
                    call.lgathers.append(g)
                    continue
                parts = [(p[0], p[1], p[2], index(p[3])) if p[0] == "index" else p for p in g[1]]
                if g[0] == "list":
                    call.lgathers.append(("list", parts, None if g[2] is None else index(g[2])))
                elif g[0] == "lsum":
                    call.lgathers.append(("lsum", parts))
                else:
                    call.lgathers.append(("lseg", parts, index(g[2]), g[3], g[4]))
            call.fn = fr.function(torch, self.leaves[r], self.device, call.absent)
            self.calls.append(call)
        self.lists = train if lists is None else lists
        # Inference reuses its buffers: every run overwrites every row but
        # the zero rows, which nothing writes. Training with buffers makes
        # them per step, so that autograd records that step's writes.
        self.buffers = None if self.lists or train else self._buffers()

    def _buffers(self) -> list[Any]:
        torch = self.torch
        return [torch.zeros((self.sizes[k], *k[1]), device=self.device) for k in self.keys]

    def forward_lists(self) -> Any:
        """The mini-batch's total loss with the state in per-level lists:
        every call's outputs kept as they come, every input read from the
        calls that made it (the module docs, "State, training")."""
        torch = self.torch
        outs: list[Any] = []
        parts_of_loss = []
        dev = self.device
        for c in self.calls:
            args = []
            for g in c.lgathers:
                kind = g[0]
                if kind == "none":
                    args.append(None)
                    continue
                ps = []
                for p in g[1]:
                    k = p[0]
                    if k == "all":
                        ps.append(outs[p[1]][p[2]])
                    elif k == "narrow":
                        ps.append(outs[p[1]][p[2]].narrow(0, p[3], p[4]))
                    elif k == "index":
                        ps.append(outs[p[1]][p[2]].index_select(0, p[3]))
                    else:
                        ps.append(torch.zeros((p[1], *p[2]), device=dev))
                x = ps[0] if len(ps) == 1 else torch.cat(ps)
                if kind == "list":
                    args.append(x if g[2] is None else x.index_select(0, g[2]))
                elif kind == "lsum":
                    args.append(x.sum(0, keepdim=True))
                else:
                    args.append(x.new_zeros((g[3], *g[4])).index_add_(0, g[2], x))
            o = c.fn(*args, c.row, c.label, len(c.nodes))
            outs.append(o)
            if c.losses is True:
                parts_of_loss.append(o[0])
            elif c.losses is not None:
                parts_of_loss.append(o[0].index_select(0, c.losses))
        if len(parts_of_loss) == 1:
            return parts_of_loss[0].sum()
        return torch.stack([p.sum() for p in parts_of_loss]).sum()

    def forward(self) -> Any:
        """The mini-batch's total loss: every call in level order, the state
        in buffers (or in lists, :meth:`forward_lists`)."""
        torch = self.torch
        if self.lists:
            return self.forward_lists()
        bufs = self.buffers if self.buffers is not None else self._buffers()
        parts = []
        for c in self.calls:
            args = []
            for g in c.gathers:
                kind = g[0]
                if kind == "view":
                    args.append(bufs[g[1]].narrow(0, g[2], g[3]))
                elif kind == "index":
                    args.append(bufs[g[1]].index_select(0, g[2]))
                elif kind == "none":
                    args.append(None)
                elif kind == "seg":
                    src = bufs[g[1]].index_select(0, g[2])
                    args.append(src.new_zeros((g[4], *g[5])).index_add_(0, g[3], src))
                elif kind == "sum":
                    # sum saves no input for its backward: a view is safe when training too
                    args.append(bufs[g[1]].narrow(0, g[2], g[3]).sum(0, keepdim=True))
                else:
                    args.append(bufs[g[1]].index_select(0, g[2]).sum(0, keepdim=True))
            outs = c.fn(*args, c.row, c.label, len(c.nodes))
            for s, j, first in c.writes:
                bufs[s].narrow(0, first, len(c.nodes)).copy_(outs[j])
            if c.losses is True:
                parts.append(outs[0])
            elif c.losses is not None:
                parts.append(outs[0].index_select(0, c.losses))
        if len(parts) == 1:
            return parts[0].sum()
        return torch.stack([p.sum() for p in parts]).sum()

    def run_once(self) -> dict[str, Any]:
        return timed_step(self.torch, self.forward, self.train, self.leaves, len(self.calls), self.sync)

    def gradients(self) -> list[tuple[str, dict[str, Any], Any]]:
        """Per role and export parameter: (role, spec, gradient array) of the
        last step, each parameter's the sum of its slices of the stacked
        leaves' gradients (zeros where none reached it)."""
        import numpy as np

        out = []
        for role, leaves, sites in zip(self.export.roles, self.leaves, self.sites):
            for spec in role["params"]:
                g = np.zeros(spec["shape"], np.float32)
                for leaf, first, rows in sites[spec["name"]]:
                    grad = leaves[leaf].grad
                    if grad is None:
                        continue
                    part = grad if first is None else grad.narrow(0, first, rows)
                    g += part.detach().cpu().numpy().reshape(g.shape)
                out.append((role["role"], spec, g))
        return out
