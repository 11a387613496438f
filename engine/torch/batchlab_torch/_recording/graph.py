"""The graph a recording (or :func:`batchlab_torch.run`'s discovery) builds,
and what it becomes: batchlab roles, ports, types and trace nodes.

A *call kind* (:class:`Kind`) is everything that makes two calls the same
node type: the marked module or the free torch function, the structure of
its arguments, each tensor argument's shape and dtype, the non-tensor
arguments. Every node is one call of a kind; its arguments are
:class:`Src` (output ``k`` of node ``node``) or ``None`` (zeros: an absent
optional input). :meth:`Graph.finish` folds sums, settles instances and
losses, groups each kind's tensor arguments into ports and names types and
roles, deterministically: the same calls give the same names, whatever
order they came in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .cell import bl_shape, clean_name


class RecordError(Exception):
    """A model batchlab cannot record as it is; the message says what, where
    (module, torch function, file:line) and what to change."""


@dataclass(frozen=True)
class Src:
    """Output ``k`` (in the call's flattened outputs) of node ``node``."""

    node: int
    k: int


@dataclass
class Kind:
    """One kind of call: see the module docs.

    ``leaves`` holds, per flattened argument: ``("tensor", tshape, dtype)``,
    ``("data", tshape, dtype)`` (an integer input: token id or label),
    ``("param", name)`` or ``("static", repr)``.
    """

    key: tuple
    base: str  # role name before disambiguation: the marked name, or the op's
    what: str  # "cell" | "op" | "sum" | "mean"
    leaves: tuple
    names: tuple[str, ...]  # an input name per leaf
    out_tshapes: tuple[tuple[int, ...], ...]
    func: Any = None  # the torch function of an op kind
    module: str = ""  # the marked module's path, for a cell kind
    frame: str = ""  # where the kind was first called
    tape: Any = None  # torch.fx.Graph of the first call (cells and ops)
    probe: dict[str, Any] = field(default_factory=dict)  # fx node name -> tensor
    # Filled by Graph.finish:
    role: str = ""
    type_name: str = ""
    ports: list[list[int]] = field(default_factory=list)  # per port, tensor positions (input order)
    arity: list[str] = field(default_factory=list)
    out_order: list[int] = field(default_factory=list)  # batchlab output j = torch output out_order[j]
    loss: bool = False
    data_use: dict[int, str] = field(default_factory=dict)  # integer input position -> "id" | "label"
    op_names: list[str] = field(default_factory=list)  # the torch calls of a cell's first call
    first_node: int = -1  # the node of the first call (whose values ``probe`` holds)
    arg_spec: Any = None  # how the leaves fold back into the call's arguments
    arg_names: tuple[str, ...] = ()  # a cell's bound argument names, in order
    out_spec: Any = None  # how the outputs fold back into what the call returned
    data_slot: dict[int, int] = field(default_factory=dict)  # integer position -> its column (bt.run)

    @property
    def tensor_positions(self) -> list[int]:
        return [i for i, leaf in enumerate(self.leaves) if leaf[0] == "tensor"]

    def signature(self) -> str:
        """The part of the type name after the role: the tensor inputs'
        batchlab shapes and `int` for an integer input. (Kinds that differ
        only in other arguments get the role's `-2`... in their names.)"""
        parts = []
        for leaf in self.leaves:
            if leaf[0] == "tensor":
                parts.append("x".join(str(d) for d in bl_shape(leaf[1])))
            elif leaf[0] == "data":
                parts.append("int")
        if self.what == "sum":
            parts = parts[:1]
        return ";".join(parts)


@dataclass
class Node:
    kind: Kind
    args: list[Src | None]  # per tensor position
    data: dict[str, int]
    instance: int | None
    outputs: list[Any] = field(default_factory=list)  # torch tensors (recording) or shapes
    raw: Any = None  # a scalar output with its autograd graph (a loss candidate)
    ints: dict[int, int] = field(default_factory=dict)  # integer argument by leaf position


class Graph:
    """Nodes in call order (producers first) and their kinds."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.kinds: dict[tuple, Kind] = {}
        self.renumber: dict[int, int] = {}
        # Sum nodes a mean was made from (``sum(xs) / len(xs)``): dropped
        # when nothing else reads them, lest an unread scalar sum be a loss.
        self.superseded: set[int] = set()

    def add(
        self, kind: Kind, args: list[Src | None], data: dict[str, int], instance: int | None, outputs: list[Any]
    ) -> int:
        self.nodes.append(Node(kind, args, data, instance, outputs))
        if kind.first_node < 0:
            kind.first_node = len(self.nodes) - 1
        return len(self.nodes) - 1

    # ------------------------------------------------------------ finishing
    def finish(self, keep: set[int] | None = None, ports: bool = True) -> list[Node]:
        """Folds, settles and names (see the module docs); returns the nodes
        in trace order with their ``Src`` renumbered to it (``renumber``:
        old id -> new). Nodes in ``keep`` (values the caller still needs)
        are not folded away. ``ports=False`` stops before grouping ports
        and naming roles (what a run needs is the nodes and their kinds)."""
        nodes = self._fold_sums(keep or set())
        self._settle_instances(nodes)
        self._split_losses(nodes)
        if not ports:
            return nodes
        kinds = self._used_kinds(nodes)
        for k in kinds:
            self._group_ports(k, nodes)
        self._order_outputs(kinds, nodes)
        self._name(kinds)
        return nodes

    def _consumers(self, nodes: list[Node]) -> list[list[int]]:
        cons: list[list[int]] = [[] for _ in nodes]
        for i, n in enumerate(nodes):
            for a in n.args:
                if a is not None:
                    cons[a.node].append(i)
        return cons

    def _fold_sums(self, keep: set[int]) -> list[Node]:
        """A sum read only by one other sum is inlined into it (``sum(xs)``
        in Python is a chain of adds; a per-instance sum of losses summed
        again over the batch is one sum)."""
        nodes = self.nodes
        gone = self._unread_superseded(keep)
        cons = [[c for c in cs if not gone[c]] for cs in self._consumers(nodes)]
        for i, n in enumerate(nodes):
            if n.kind.what != "sum" or gone[i]:
                continue
            args: list[Src | None] = []
            for a in n.args:
                if a is not None and gone[a.node]:
                    args.extend(nodes[a.node].args)
                else:
                    args.append(a)
            n.args = args
            c = cons[i]
            if i not in keep and len(c) == 1 and nodes[c[0]].kind.what == "sum" and nodes[c[0]].kind.key == n.kind.key:
                gone[i] = True
        kept = [i for i in range(len(nodes)) if not gone[i]]
        new_id = {old: new for new, old in enumerate(kept)}
        self.renumber = new_id
        for k in self.kinds.values():
            k.first_node = new_id.get(k.first_node, -1)
        out = []
        for i in kept:
            n = nodes[i]
            n.args = [None if a is None else Src(new_id[a.node], a.k) for a in n.args]
            out.append(n)
        return out

    def _unread_superseded(self, keep: set[int]) -> list[bool]:
        """Per node: a superseded sum that nothing live reads (consumers come
        after producers, so one backward pass settles chains of them)."""
        nodes = self.nodes
        readers = [len(c) for c in self._consumers(nodes)]
        dead = [False] * len(nodes)
        for i in sorted(self.superseded, reverse=True):
            if i not in keep and readers[i] == 0:
                dead[i] = True
                for a in nodes[i].args:
                    if a is not None:
                        readers[a.node] -= 1
        return dead

    def _settle_instances(self, nodes: list[Node]) -> None:
        """A node made outside every call of the model takes the instance of
        its arguments when they share one, else (no arguments) that of its
        readers when they share one."""
        for n in nodes:
            if n.instance is None and n.args:
                inst = {nodes[a.node].instance for a in n.args if a is not None}
                if len(inst) == 1:
                    n.instance = inst.pop()
        cons = self._consumers(nodes)
        for i in range(len(nodes) - 1, -1, -1):
            n = nodes[i]
            if n.instance is None and not any(a is not None for a in n.args) and cons[i]:
                inst = {nodes[c].instance for c in cons[i]}
                if len(inst) == 1 and None not in inst:
                    n.instance = inst.pop()

    def _split_losses(self, nodes: list[Node]) -> None:
        """A node with one scalar output that nothing reads is a loss (the
        training loss is their sum); it becomes a node of its kind's
        ``.loss`` twin, so that a role is a loss role or not, whatever else
        its kind's nodes do, and the same node gets the same type in every
        graph."""
        cons = self._consumers(nodes)
        for i, n in enumerate(nodes):
            if not cons[i] and len(n.kind.out_tshapes) == 1 and bl_shape(n.kind.out_tshapes[0]) == (1,):
                n.kind = self.loss_twin(n.kind)

    def loss_twin(self, k: Kind) -> Kind:
        """The ``.loss`` twin of kind ``k`` (registered beside it)."""
        if k.loss:
            return k
        key = k.key + ("loss",)
        twin = self.kinds.get(key)
        if twin is None:
            twin = Kind(**{f: getattr(k, f) for f in k.__dataclass_fields__})
            twin.key = key
            twin.base = k.base + ".loss"
            twin.loss = True
            self.kinds[key] = twin
        return twin

    def _used_kinds(self, nodes: list[Node]) -> list[Kind]:
        seen: dict[int, Kind] = {}
        for n in nodes:
            seen.setdefault(id(n.kind), n.kind)
        return list(seen.values())

    def _group_ports(self, k: Kind, nodes: list[Node]) -> None:
        """Groups the kind's tensor positions into ports: positions read from
        the same producer in every call share a port; a port none of whose
        positions has a producer in some call is optional there."""
        pos = k.tensor_positions
        calls = [n.args for n in nodes if n.kind is k]
        if k.what == "sum":
            k.ports, k.arity = [[pos[0]]], ["many"]
            return
        groups: list[list[int]] = []
        for pi, p in enumerate(pos):
            placed = False
            for g in groups:
                q = pos.index(g[0])
                if all(_same_producer(c[pi], c[q]) for c in calls) and all(
                    c[pi] is None or c[pi].k not in [c[pos.index(r)].k for r in g if c[pos.index(r)] is not None]
                    for c in calls
                ):
                    g.append(p)
                    placed = True
                    break
            if not placed:
                groups.append([p])
        arity = []
        for g in groups:
            present = [all(c[pos.index(p)] is not None for p in g) for c in calls]
            absent = [all(c[pos.index(p)] is None for p in g) for c in calls]
            if not all(a or b for a, b in zip(present, absent)):
                raise RecordError(
                    f"{k.frame}: {_what(k)}: the arguments {', '.join(k.names[p] for p in g)} come from one call "
                    "but are zeros in part; batchlab reads all of a producer's outputs or none"
                )
            arity.append("one" if all(present) else "optional")
        k.ports, k.arity = groups, arity

    def _order_outputs(self, kinds: list[Kind], nodes: list[Node]) -> None:
        """Orders every kind's outputs so that each port reads its producer's
        first outputs (batchlab's binding rule), sorting each port's inputs
        by that order. The sets of outputs read must nest."""
        reads: dict[int, list[tuple[int, ...]]] = {id(k): [] for k in kinds}
        for n in nodes:
            k = n.kind
            pos = k.tensor_positions
            for g in k.ports:
                srcs = [n.args[pos.index(p)] for p in g]
                if srcs[0] is None:
                    continue
                prod = nodes[srcs[0].node].kind
                reads[id(prod)].append(tuple(sorted(s.k for s in srcs)))
        for k in kinds:
            sets = sorted(set(reads[id(k)]), key=len)
            order: list[int] = []
            for s in sets:
                if not set(order) <= set(s) or len(set(order)) > len(s):
                    raise RecordError(
                        f"{k.frame}: {_what(k)}: its outputs are read in groups that do not nest "
                        f"({', '.join(str(list(x)) for x in sets)}); batchlab binds a port to its producer's first "
                        "outputs: pass every output a consumer needs, or return them in one order"
                    )
                order += [o for o in s if o not in order]
            order += [o for o in range(len(k.out_tshapes)) if o not in order]
            k.out_order = order
        # Each port's inputs in producer-output order, the same in every call.
        for k in kinds:
            pos = k.tensor_positions
            new_ports = []
            for g in k.ports:
                ranks: list[int] | None = None
                for n in nodes:
                    if n.kind is not k:
                        continue
                    srcs = [n.args[pos.index(p)] for p in g]
                    if srcs[0] is None:
                        continue
                    order = nodes[srcs[0].node].kind.out_order
                    r = [order.index(s.k) for s in srcs]
                    if sorted(r) != list(range(len(g))):
                        raise RecordError(
                            f"{k.frame}: {_what(k)}: the arguments {', '.join(k.names[p] for p in g)} read outputs "
                            f"{[s.k for s in srcs]} of their producer; batchlab binds a port to its producer's first "
                            "outputs (pass the leading outputs too)"
                        )
                    if ranks is not None and r != ranks:
                        raise RecordError(
                            f"{k.frame}: {_what(k)}: the arguments {', '.join(k.names[p] for p in g)} read their "
                            "producers' outputs in different orders in different calls"
                        )
                    ranks = r
                if ranks is None:
                    ranks = list(range(len(g)))
                new_ports.append([p for _, p in sorted(zip(ranks, g))])
            k.ports = new_ports

    def _name(self, kinds: list[Kind]) -> None:
        """Role ``base`` (``base-2``... when one base has several kinds, in
        the order of their signatures) and type ``base[signature]``."""
        by_base: dict[str, list[Kind]] = {}
        for k in kinds:
            by_base.setdefault(k.base, []).append(k)
        taken: set[str] = set()
        for base, ks in sorted(by_base.items()):
            ks.sort(key=lambda k: (k.signature(), repr(k.key)))
            for i, k in enumerate(ks):
                k.role = clean_name(base if i == 0 else f"{base}-{i + 1}")
                name = f"{base}[{k.signature()}]"
                if name in taken:
                    name = f"{k.role}[{k.signature()}]"
                taken.add(name)
                k.type_name = name


def _same_producer(a: Src | None, b: Src | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.node == b.node


def _what(k: Kind) -> str:
    return f"cell `{k.base}`" if k.what == "cell" else f"op `{k.base}`"


def feed_order(kinds: list[int], edges: set[tuple[int, int]]) -> list[int]:
    """``kinds`` (given in first-call order) reordered so that a kind comes
    after the kinds feeding it (``edges``: producer, consumer), as a built-in
    workload declares its roles; among kinds free to go next the first
    called goes first, and a cycle is broken at its first-called kind.

    Type ids follow this order in a recorded trace and in bt.run's schedule
    requests: heuristics that break ties by type id (``cavs``) then see a
    recorded model as they see the same model built in."""
    rank = {k: i for i, k in enumerate(kinds)}
    feeds: dict[int, set[int]] = {k: set() for k in kinds}
    for a, b in edges:
        if a != b and a in feeds and b in feeds:
            feeds[b].add(a)
    out: list[int] = []
    placed: set[int] = set()
    while len(out) < len(kinds):
        free = [k for k in kinds if k not in placed and feeds[k] <= placed]
        k = free[0] if free else min((k for k in kinds if k not in placed), key=rank.__getitem__)
        out.append(k)
        placed.add(k)
    return out
