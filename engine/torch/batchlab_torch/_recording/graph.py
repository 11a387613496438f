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

import numpy as np

from .cell import bl_shape, clean_name


class RecordError(Exception):
    """A model batchlab cannot record as it is; the message says what, where
    (module, torch function, file:line) and what to change."""


class Src:
    """Output ``k`` (in the call's flattened outputs) of node ``node``."""

    __slots__ = ("node", "k")

    def __init__(self, node: int, k: int) -> None:
        self.node = node
        self.k = k

    def __eq__(self, other: object) -> bool:
        return type(other) is Src and other.node == self.node and other.k == self.k

    def __hash__(self) -> int:
        return hash((self.node, self.k))

    def __repr__(self) -> str:
        return f"Src(node={self.node}, k={self.k})"


@dataclass(eq=False)
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
    index: int = -1  # its place in the registry (:class:`Kinds`)
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

    @property
    def data_positions(self) -> list[int]:
        return [i for i, leaf in enumerate(self.leaves) if leaf[0] == "data"]

    @property
    def scalar_out(self) -> bool:
        """One output, a scalar (what a loss is)."""
        return len(self.out_tshapes) == 1 and bl_shape(self.out_tshapes[0]) == (1,)

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


class Kinds:
    """The kinds met so far, by key and by index (``Kind.index``): a
    recording's, or a Runner's across its mini-batches."""

    def __init__(self) -> None:
        self.by_key: dict[tuple, Kind] = {}
        self.list: list[Kind] = []

    def get(self, key: tuple) -> Kind | None:
        return self.by_key.get(key)

    def put(self, kind: Kind) -> Kind:
        """Registers ``kind`` under its key (once) and gives it an index."""
        old = self.by_key.get(kind.key)
        if old is not None and old is kind:
            return kind
        if kind.index < 0:
            kind.index = len(self.list)
            self.list.append(kind)
        self.by_key[kind.key] = kind
        return kind

    def loss_twin(self, k: Kind) -> Kind:
        """The ``.loss`` twin of kind ``k`` (registered beside it): a node
        whose scalar output nothing reads is a loss, a node of the twin."""
        if k.loss:
            return k
        key = k.key + ("loss",)
        twin = self.by_key.get(key)
        if twin is None:
            twin = Kind(**{f: getattr(k, f) for f in k.__dataclass_fields__})
            twin.key = key
            twin.base = k.base + ".loss"
            twin.loss = True
            twin.index = -1
            self.put(twin)
        return twin


@dataclass
class Node:
    """A node of a finished recording (the folder writer's view)."""

    kind: Kind
    args: list[Src | None]  # per tensor position (a sum: its terms)
    data: dict[str, int]  # "id" / "label" -> value
    instance: int | None
    outputs: list[Any] = field(default_factory=list)  # torch tensors (recording)
    raw: Any = None  # a scalar output with its autograd graph (a loss candidate)
    ints: dict[int, int] = field(default_factory=dict)  # integer argument by leaf position


@dataclass
class Finished:
    """A finished graph as arrays, node ids in trace order: each node's kind
    index, sample (``-1``: none), arguments (CSR ``aptr``; producer node
    ``anode``, ``-1`` for an absent input, and its output ``ak``; a sum's
    are its terms) and integer inputs (CSR ``dptr``/``dval``, in leaf
    order); ``renumber`` maps the ids given while recording to these
    (``-1``: folded away)."""

    kid: np.ndarray
    inst: np.ndarray
    aptr: np.ndarray
    anode: np.ndarray
    ak: np.ndarray
    dptr: np.ndarray
    dval: np.ndarray
    renumber: np.ndarray

    @property
    def n(self) -> int:
        return len(self.kid)


class Graph:
    """Nodes in call order (producers first), as flat lists: appending a
    node is a few list appends, and finishing is array work (a mini-batch
    of ``bt.run`` makes thousands of nodes per call of the user's loop)."""

    def __init__(self, kinds: Kinds | None = None, values: bool = False) -> None:
        self.kinds = kinds if kinds is not None else Kinds()
        self.kid: list[int] = []
        self.inst: list[int] = []  # -1: no sample
        self.aptr: list[int] = [0]
        self.anode: list[int] = []  # -1: absent (zeros)
        self.ak: list[int] = []
        self.dptr: list[int] = [0]
        self.dval: list[int] = []
        self.outside: list[int] = []  # nodes made outside every call of the model
        # With ``values`` (recording): per node its outputs and raw scalar.
        self.values = values
        self.outputs: list[Any] = []
        self.raw: list[Any] = []
        # Sum nodes a mean was made from (``sum(xs) / len(xs)``): dropped
        # when nothing else reads them, lest an unread scalar sum be a loss.
        self.superseded: set[int] = set()
        # Values the caller still needs (what the model returned): never
        # folded into another sum, never dropped.
        self.keep: set[int] = set()

    def __len__(self) -> int:
        return len(self.kid)

    def clear(self) -> None:
        """Empties the graph in place (the same list objects: a discovery's
        fast paths hold them between mini-batches)."""
        for lst in (self.kid, self.inst, self.anode, self.ak, self.dval, self.outside, self.outputs, self.raw):
            lst.clear()
        del self.aptr[1:]
        del self.dptr[1:]
        self.superseded.clear()
        self.keep.clear()

    def add(self, kind: Kind, args: list[Src | None], ints: list[int], instance: int | None, outside: bool) -> int:
        nid = len(self.kid)
        if kind.index < 0:
            self.kinds.put(kind)
        self.kid.append(kind.index)
        self.inst.append(-1 if instance is None else instance)
        an, ak = self.anode, self.ak
        for a in args:
            if a is None:
                an.append(-1)
                ak.append(0)
            else:
                an.append(a.node)
                ak.append(a.k)
        self.aptr.append(len(an))
        if ints:
            self.dval.extend(ints)
        self.dptr.append(len(self.dval))
        if outside:
            self.outside.append(nid)
        if self.values:
            self.outputs.append(None)
            self.raw.append(None)
        if kind.first_node < 0:
            kind.first_node = nid
        return nid

    def kind_of(self, nid: int) -> Kind:
        return self.kinds.list[self.kid[nid]]

    def args_of(self, nid: int) -> list[Src | None]:
        return [
            None if self.anode[j] < 0 else Src(self.anode[j], self.ak[j])
            for j in range(self.aptr[nid], self.aptr[nid + 1])
        ]

    def instance(self, nid: int) -> int | None:
        i = self.inst[nid]
        return None if i < 0 else i

    # ------------------------------------------------------------ finishing
    def finish_arrays(self) -> Finished:
        """Drops what combines the samples' results outside the model,
        folds sums, settles instances and marks losses (see the module
        docs); returns the nodes as arrays in trace order."""
        n = len(self.kid)
        kinds = self.kinds.list
        kid = np.array(self.kid, dtype=np.int64)
        inst = np.array(self.inst, dtype=np.int64)
        aptr = np.array(self.aptr, dtype=np.int64)
        anode = np.array(self.anode, dtype=np.int64)
        ak = np.array(self.ak, dtype=np.int64)
        dptr = np.array(self.dptr, dtype=np.int64)
        dval = np.array(self.dval, dtype=np.int64)
        consumer = np.repeat(np.arange(n, dtype=np.int64), np.diff(aptr))
        what = np.array([k.what for k in kinds] or ["cell"])
        is_sum = what[kid] == "sum" if n else np.zeros(0, dtype=bool)
        gone = np.zeros(n, dtype=bool)
        keep = np.zeros(n, dtype=bool)
        if self.keep:
            keep[np.fromiter(self.keep, dtype=np.int64)] = True
        if self.outside:
            gone |= self._loop_nodes(n, kid, what, aptr, anode, keep)
        if self.superseded:
            gone |= self._unread_superseded(n, aptr, anode, consumer, gone, keep)
        # Readers of each node among those staying, and for a node with one
        # reader, that reader.
        live = (anode >= 0) & ~gone[consumer]
        reads = np.bincount(anode[live], minlength=n) if n else np.zeros(0, dtype=np.int64)
        reader = np.full(n, -1, dtype=np.int64)
        reader[anode[live]] = consumer[live]
        sums = np.nonzero(is_sum & ~gone)[0]
        if len(sums):
            aptr, anode, ak, gone = self._fold_sums(sums, kid, aptr, anode, ak, gone, keep, reads, reader, is_sum)
        stay = ~gone
        renumber = np.full(n + 1, -1, dtype=np.int64)  # index n: an absent producer stays -1
        renumber[np.nonzero(stay)[0]] = np.arange(int(stay.sum()))
        counts = np.diff(aptr)
        arg_stay = np.repeat(stay, counts)
        new_counts = counts[stay]
        new_aptr = np.zeros(len(new_counts) + 1, dtype=np.int64)
        np.cumsum(new_counts, out=new_aptr[1:])
        new_anode = renumber[np.where(anode[arg_stay] >= 0, anode[arg_stay], n)]
        new_ak = ak[arg_stay]
        dcounts = np.diff(dptr)
        new_dptr = np.zeros(int(stay.sum()) + 1, dtype=np.int64)
        np.cumsum(dcounts[stay], out=new_dptr[1:])
        new_dval = dval[np.repeat(stay, dcounts)]
        f = Finished(kid[stay], inst[stay], new_aptr, new_anode, new_ak, new_dptr, new_dval, renumber[:n])
        if (f.inst < 0).any():
            self._settle_instances(f)
        self._split_losses(f)
        for k in kinds:
            k.first_node = int(renumber[k.first_node]) if k.first_node >= 0 else -1
        return f

    def _loop_nodes(
        self, n: int, kid: np.ndarray, what: np.ndarray, aptr: np.ndarray, anode: np.ndarray, keep: np.ndarray
    ) -> np.ndarray:
        """The nodes that combine the samples' results outside every call of
        the model (the loop's sum or mean of the losses) and every node that
        reads one: the user's loop is not part of the graph, so a recording
        is the same whatever the loop does with the losses (summed,
        averaged, listed, ``backward()`` per sample), and the same graph as
        ``bt.run`` sees. The training loss is then the sum of the samples'
        losses."""
        gone = np.zeros(n, dtype=bool)
        first = None
        for i in self.outside:
            if what[kid[i]] in ("sum", "mean") and not keep[i]:
                gone[i] = True
                first = i if first is None else first
        if first is None:
            return gone
        for i in range(first + 1, n):
            if not gone[i]:
                a = anode[aptr[i] : aptr[i + 1]]
                if len(a) and gone[a[a >= 0]].any():
                    gone[i] = True
        return gone

    def _unread_superseded(
        self, n: int, aptr: np.ndarray, anode: np.ndarray, consumer: np.ndarray, gone: np.ndarray, keep: np.ndarray
    ) -> np.ndarray:
        """Superseded sums that nothing staying reads (consumers come after
        producers, so one backward pass settles chains of them)."""
        live = (anode >= 0) & ~gone[consumer]
        readers = np.bincount(anode[live], minlength=n)
        dead = np.zeros(n, dtype=bool)
        for i in sorted(self.superseded, reverse=True):
            if not keep[i] and not gone[i] and readers[i] == 0:
                dead[i] = True
                a = anode[aptr[i] : aptr[i + 1]]
                for p in a[a >= 0].tolist():
                    readers[p] -= 1
        return dead

    def _fold_sums(
        self,
        sums: np.ndarray,
        kid: np.ndarray,
        aptr: np.ndarray,
        anode: np.ndarray,
        ak: np.ndarray,
        gone: np.ndarray,
        keep: np.ndarray,
        reads: np.ndarray,
        reader: np.ndarray,
        is_sum: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A sum read only by one other sum of its kind is inlined into it
        (``sum(xs)`` in Python is a chain of adds; a per-sample sum of
        losses summed again is one sum). Returns the arguments with the
        folded sums' terms spliced in, and ``gone`` with them marked."""
        gone = gone.copy()
        # The folded: sums (not kept) whose one reader is a sum of their kind.
        cand = np.zeros(len(kid), dtype=bool)
        cand[sums] = True
        cand &= ~gone & ~keep & (reads == 1) & (reader >= 0)
        idx = np.nonzero(cand)[0]
        idx = idx[is_sum[reader[idx]] & (kid[reader[idx]] == kid[idx])]
        if not len(idx):
            return aptr, anode, ak, gone
        gone[idx] = True
        folded = set(idx.tolist())
        # Each reader of a folded sum gets that sum's terms in its place; in
        # id order, so a folded sum that itself read folded ones (a chain of
        # adds) is expanded before its reader.
        A, K, P = anode.tolist(), ak.tolist(), aptr.tolist()
        new_args: dict[int, tuple[list[int], list[int]]] = {}
        for i in sorted(set(reader[idx].tolist())):
            nn: list[int] = []
            kk: list[int] = []
            for j in range(P[i], P[i + 1]):
                a = A[j]
                if a in folded:
                    sub = new_args.get(a)
                    if sub is None:
                        nn += A[P[a] : P[a + 1]]
                        kk += K[P[a] : P[a + 1]]
                    else:
                        nn += sub[0]
                        kk += sub[1]
                else:
                    nn.append(a)
                    kk.append(K[j])
            new_args[i] = (nn, kk)
        changed = [i for i in new_args if not gone[i]]
        pieces_n, pieces_k, counts = [], [], np.diff(aptr).copy()
        at = 0
        for i in sorted(changed):
            pieces_n.append(anode[at : aptr[i]])
            pieces_k.append(ak[at : aptr[i]])
            nodes, ks = new_args[i]
            pieces_n.append(np.array(nodes, dtype=np.int64))
            pieces_k.append(np.array(ks, dtype=np.int64))
            counts[i] = len(nodes)
            at = int(aptr[i + 1])
        pieces_n.append(anode[at:])
        pieces_k.append(ak[at:])
        new_aptr = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=new_aptr[1:])
        return new_aptr, np.concatenate(pieces_n), np.concatenate(pieces_k), gone

    def _settle_instances(self, f: Finished) -> None:
        """A node made outside every call of the model takes the instance of
        its arguments when they share one, else (no arguments) that of its
        readers when they share one."""
        for i in np.nonzero(f.inst < 0)[0].tolist():
            a = f.anode[f.aptr[i] : f.aptr[i + 1]]
            a = a[a >= 0]
            if len(a):
                inst = set(f.inst[a].tolist())
                if len(inst) == 1:
                    f.inst[i] = inst.pop()
        orphans = np.nonzero(f.inst < 0)[0]
        if not len(orphans):
            return
        consumer = np.repeat(np.arange(f.n), np.diff(f.aptr))
        for i in orphans[::-1].tolist():
            a = f.anode[f.aptr[i] : f.aptr[i + 1]]
            if (a >= 0).any():
                continue
            readers = consumer[f.anode == i]
            if len(readers):
                inst = set(f.inst[readers].tolist())
                if len(inst) == 1 and -1 not in inst:
                    f.inst[i] = inst.pop()

    def _split_losses(self, f: Finished) -> None:
        """A node with one scalar output that nothing reads is a loss (the
        training loss is their sum); it becomes a node of its kind's
        ``.loss`` twin, so that a role is a loss role or not, whatever else
        its kind's nodes do, and the same node gets the same type in every
        graph."""
        n = f.n
        reads = np.bincount(f.anode[f.anode >= 0], minlength=n) if n else np.zeros(0, dtype=np.int64)
        kinds = self.kinds.list
        scalar = np.array([k.scalar_out and not k.loss for k in kinds] or [False])
        cand = np.nonzero((reads == 0) & scalar[f.kid])[0]
        if not len(cand):
            return
        twin = {}
        for q in np.unique(f.kid[cand]).tolist():
            twin[q] = self.kinds.loss_twin(kinds[q]).index
        # Registering twins may have grown the list: the table is per kind id.
        table = np.arange(len(self.kinds.list), dtype=np.int64)
        for q, t in twin.items():
            table[q] = t
        f.kid[cand] = table[f.kid[cand]]

    def finish(self) -> list[Node]:
        """Finishes the graph (:meth:`finish_arrays`) and groups ports, orders
        outputs and names roles and types (what a recording's folder needs);
        returns the nodes in trace order."""
        f = self.finish_arrays()
        nodes = self.nodes_of(f)
        kinds = self._used_kinds(nodes)
        for k in kinds:
            self._group_ports(k, nodes)
        self._order_outputs(kinds, nodes)
        self._name(kinds)
        return nodes

    def nodes_of(self, f: Finished) -> list[Node]:
        """The finished nodes as :class:`Node` objects."""
        old = np.full(f.n, -1, dtype=np.int64)
        kept = np.nonzero(f.renumber >= 0)[0]
        old[f.renumber[kept]] = kept
        kinds = self.kinds.list
        out = []
        for i in range(f.n):
            k = kinds[int(f.kid[i])]
            args = [
                None if f.anode[j] < 0 else Src(int(f.anode[j]), int(f.ak[j])) for j in range(f.aptr[i], f.aptr[i + 1])
            ]
            vals = f.dval[f.dptr[i] : f.dptr[i + 1]].tolist()
            ints = dict(zip(k.data_positions, vals))
            o = int(old[i])
            node = Node(
                k,
                args,
                {use: ints[p] for p, use in k.data_use.items() if p in ints},
                None if f.inst[i] < 0 else int(f.inst[i]),
                self.outputs[o] if self.values else [],
                self.raw[o] if self.values else None,
                ints,
            )
            out.append(node)
        return out

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
