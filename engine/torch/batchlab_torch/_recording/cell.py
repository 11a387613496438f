"""A batchlab cell under construction, and its YAML text (``docs/cells.md``).

Values follow batchlab's conventions: a tensor's *batchlab shape* is its
torch shape without leading size-1 dims (a row ``[1, 64]`` is the vector
``[64]``; a scalar is ``[1]``), since a cell computes one node and the
leading ones are the per-instance batch dims of eager PyTorch code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

Shape = tuple[int, ...]


def bl_shape(tshape: Sequence[int]) -> Shape:
    """Batchlab shape of a torch shape: leading 1s dropped, at least one dim."""
    s = tuple(int(d) for d in tshape)
    while len(s) > 1 and s[0] == 1:
        s = s[1:]
    return s if s else (1,)


def bl_dim(tshape: Sequence[int], dim: int) -> int:
    """The batchlab dim that torch dim ``dim`` of a ``tshape`` tensor is;
    negative when it is one of the dropped leading dims."""
    n = len(tshape)
    if n == 0:
        return 0 if dim in (0, -1) else -1
    d = dim % n
    return d - (n - len(bl_shape(tshape)))


@dataclass(eq=False)
class Val:
    """One value of a cell: a port input, a parameter or an op result."""

    name: str
    shape: Shape
    kind: str  # "input" | "param" | "op"


@dataclass
class Op:
    out: Val
    op: str
    args: list[Val]
    start: int | None = None
    len: int | None = None
    frame: str = ""
    factor: float | None = None  # scale's constant


@dataclass
class Port:
    name: str
    arity: str  # "one" | "optional" | "many"
    inputs: list[Val]


_NAME = re.compile(r"[^A-Za-z0-9_.\-]")


def clean_name(text: str) -> str:
    """``text`` with every character a cell name may not hold turned into ``_``."""
    out = _NAME.sub("_", text)
    return out or "_"


@dataclass
class Cell:
    """A cell: ports, params, ops in dependency order, outputs."""

    name: str
    doc: str = ""
    ports: list[Port] = field(default_factory=list)
    params: dict[str, Val] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    outputs: list[Val] = field(default_factory=list)
    taken: set[str] = field(default_factory=set)

    def fresh(self, hint: str) -> str:
        """A value name not used yet, from ``hint``."""
        base = clean_name(hint)
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def input(self, hint: str, shape: Shape) -> Val:
        return Val(self.fresh(hint), shape, "input")

    def param(self, name: str, shape: Shape) -> Val:
        if name in self.params:
            return self.params[name]
        v = Val(self.fresh(name), shape, "param")
        self.params[name] = v
        return v

    def emit(self, op: str, args: list[Val], shape: Shape, hint: str, frame: str = "", **attrs: float | None) -> Val:
        out = Val(self.fresh(hint), shape, "op")
        start, length, factor = attrs.get("start"), attrs.get("len"), attrs.get("factor")
        self.ops.append(
            Op(
                out,
                op,
                list(args),
                None if start is None else int(start),
                None if length is None else int(length),
                frame,
                factor,
            )
        )
        return out

    def finish(self, outputs: list[Val]) -> None:
        """Sets the outputs (copying an input, a parameter or a repeated
        value into an op result, as cells require), then folds products into
        affines and drops ops no output needs."""
        seen: set[int] = set()
        final = []
        for v in outputs:
            if v.kind != "op" or id(v) in seen:
                v = self.emit("sum", [v], v.shape, f"{v.name}_out")
            seen.add(id(v))
            final.append(v)
        self.outputs = final
        self._fold_products()
        self._drop_dead()

    def _uses(self) -> dict[int, int]:
        uses: dict[int, int] = {}
        for op in self.ops:
            for a in op.args:
                uses[id(a)] = uses.get(id(a), 0) + 1
        for v in self.outputs:
            uses[id(v)] = uses.get(id(v), 0) + 1
        return uses

    def _fold_products(self) -> None:
        """``add(affine(b, W1, x1, ...), matmul(W2, x2))`` -> ``affine(b, W1,
        x1, ..., W2, x2)`` when the two products are used only there: what a
        sum of ``nn.Linear`` calls, one of them without bias, is."""
        changed = True
        while changed:
            changed = False
            uses = self._uses()
            made = {id(op.out): op for op in self.ops}
            for op in self.ops:
                if op.op != "add" or len(op.args) != 2:
                    continue
                a, b = (made.get(id(x)) for x in op.args)
                if a is None or b is None or uses.get(id(a.out)) != 1 or uses.get(id(b.out)) != 1:
                    continue
                if a.op == "matmul" and b.op == "affine":
                    a, b = b, a
                if a.op != "affine" or b.op not in ("matmul", "affine"):
                    continue
                if b.op == "affine":
                    continue  # two biases: an affine has one
                if b.args[0].kind != "param" or len(b.args[1].shape) != 1:
                    continue
                op.op, op.args = "affine", a.args + b.args
                self.ops = [o for o in self.ops if o is not a and o is not b]
                changed = True
                break

    def _drop_dead(self) -> None:
        needed = {id(v) for v in self.outputs}
        keep = []
        for op in reversed(self.ops):
            if id(op.out) in needed:
                keep.append(op)
                needed.update(id(a) for a in op.args)
        self.ops = list(reversed(keep))
        used = {id(a) for op in self.ops for a in op.args}
        self.params = {k: v for k, v in self.params.items() if id(v) in used}

    def used_inputs(self) -> set[int]:
        return {id(a) for op in self.ops for a in op.args if a.kind == "input"}

    def yaml(self) -> str:
        """The cell file's text, canonical: the same cell gives the same bytes."""

        def q(s: str) -> str:
            return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

        def shape(s: Shape) -> str:
            return "[" + ", ".join(str(d) for d in s) + "]"

        lines = [f"name: {q(self.name)}"]
        if self.doc:
            lines.append("doc: " + q(" ".join(self.doc.split())))
        if self.ports:
            lines.append("ports:")
            for p in self.ports:
                lines.append(f"  - name: {q(p.name)}")
                lines.append(f"    arity: {p.arity}")
                lines.append("    inputs:")
                for v in p.inputs:
                    lines.append(f"      - {{name: {q(v.name)}, shape: {shape(v.shape)}}}")
        else:
            lines.append("ports: []")
        if self.params:
            lines.append("params:")
            for v in self.params.values():
                lines.append(f"  - {{name: {q(v.name)}, shape: {shape(v.shape)}}}")
        lines.append("ops:")
        for op in self.ops:
            extra = ""
            if op.op == "slice":
                extra = f", start: {op.start}, len: {op.len}"
            elif op.op == "scale":
                extra = f", factor: {op.factor!r}"
            args = ", ".join(q(a.name) for a in op.args)
            lines.append(f"  - {{out: {q(op.out.name)}, op: {op.op}, args: [{args}]{extra}}}")
        lines.append("outputs: [" + ", ".join(q(v.name) for v in self.outputs) + "]")
        return "\n".join(lines) + "\n"
