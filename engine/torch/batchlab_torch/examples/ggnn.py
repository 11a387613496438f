"""A Gated Graph Neural Network (Li et al. 2016, "Gated Graph Sequence
Neural Networks") classifying molecule-like graphs, as plain PyTorch: one
graph at a time, node by node, the way a user of a dynamic-graph framework
writes it. Each propagation step sends every bond's message through the
Linear of its bond type, sums a node's incoming messages and updates the
node with a GRU cell; the graph is read out by Li et al.'s gated sum (eq. 7)
and classified. ``ggnn_pyg.py`` is the same model written for PyTorch
Geometric, on the same modules: the batched baseline ``bt.run`` is measured
against."""

from __future__ import annotations

import importlib.util
import sys

import torch
import torch.nn.functional as F
from torch import nn

from .data import ATOMS, BONDS, MOLECULE_CLASSES, Molecule


class GatedReadout(nn.Module):
    """One node's term of Li et al.'s eq. 7: its final state ``h`` through
    ``tanh(j(h))``, gated by ``sigmoid(i([h, x]))`` where ``x`` is its
    initial state (the atom type's embedding)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.i = nn.Linear(2 * hidden, hidden)
        self.j = nn.Linear(hidden, hidden)

    def forward(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.i(torch.cat([h, x], dim=-1))) * torch.tanh(self.j(h))


class GGNN(nn.Module):
    def __init__(
        self,
        atom_types: int = len(ATOMS),
        bond_types: int = len(BONDS),
        hidden: int = 64,
        classes: int = MOLECULE_CLASSES,
        steps: int = 3,
    ) -> None:
        super().__init__()
        self.hidden = hidden
        self.steps = steps
        self.embed = nn.Embedding(atom_types, hidden)
        # One message Linear per bond type (Li et al.'s edge-type matrices).
        self.msg = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(bond_types))
        self.update = nn.GRUCell(hidden, hidden)
        self.readout = GatedReadout(hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, mol: Molecule) -> torch.Tensor:
        n = len(mol.atoms)
        xs = self.embed(torch.tensor(mol.atoms))  # [n, hidden]
        x = [xs[v : v + 1] for v in range(n)]
        into: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for src, dst, bond in mol.edges:
            into[dst].append((src, bond))
        h = x
        for _ in range(self.steps):
            m = [
                sum(self.msg[bond](h[src]) for src, bond in into[v]) if into[v] else torch.zeros(1, self.hidden)
                for v in range(n)
            ]
            h = [self.update(m[v], h[v]) for v in range(n)]
        g = torch.tanh(sum(self.readout(h[v], x[v]) for v in range(n)))
        return F.cross_entropy(self.out(g), torch.tensor([mol.label]))


def cells(model: GGNN) -> dict[str, nn.Module]:
    """The marked cells: a message role per bond type, the GRU update, the
    readout term."""
    return {**{f"msg{t}": lin for t, lin in enumerate(model.msg)}, "update": model.update, "readout": model.readout}


def folder_molecules(folder: str) -> tuple[list[Molecule], int]:
    """The molecules a model folder of this example was recorded on, and
    its propagation steps, rebuilt from its trace: atoms from the embedding
    lookups, bonds from the first step's messages (a ``msgT`` node reads
    its source's lookup and feeds its target's update, directly or through
    the target's ``sum``), labels from the losses."""
    from .data import folder_nodes

    nodes = folder_nodes(folder)
    mols: dict[int, Molecule] = {}
    atom: dict[int, int] = {}  # lookup node -> its atom's index in its molecule
    updates = 0
    for i, n in enumerate(nodes):
        mol = mols.setdefault(n.instance or 0, Molecule([], [], 0))
        if n.role.startswith("embedding"):
            atom[i] = len(mol.atoms)
            mol.atoms.append(n.id or 0)
        elif n.role.startswith("update"):
            updates += 1
            dst = atom.get(n.args[-1])
            if dst is None or len(n.args) < 2:
                continue  # a later step's update, or a node without in-edges
            m = nodes[n.args[0]]
            msgs = m.args if m.role.startswith("sum") else [n.args[0]]
            for a in msgs:
                mol.edges.append((atom[nodes[a].args[0]], dst, int(nodes[a].role[3:].split("-")[0])))
        elif n.role.startswith("cross_entropy"):
            mol.label = n.label or 0
    atoms = sum(len(m.atoms) for m in mols.values())
    return [mols[k] for k in sorted(mols)], updates // max(atoms, 1)


def setup(folder: str) -> dict:
    """For ``paper-repro model --torch batchlab_torch.examples.ggnn:setup``:
    the model at the folder's sizes, its cells, the molecules it was
    recorded on, and the PyTorch Geometric version on the same modules."""
    from .data import weight_shapes

    w = weight_shapes(folder)
    atom_types, hidden = w["embed.weight"]
    bond_types = sum(1 for k in w if k.startswith("msg.") and k.endswith(".weight"))
    samples, steps = folder_molecules(folder)
    model = GGNN(atom_types, bond_types, hidden, classes=w["out.weight"][0], steps=steps)

    out = {"model": model, "cells": cells(model), "samples": samples}
    if importlib.util.find_spec("torch_geometric") is None:
        print("ggnn setup: no `pyg` baseline: torch_geometric is not installed", file=sys.stderr)
    else:
        from .ggnn_pyg import PygGGNN

        out["baselines"] = {"pyg": PygGGNN(model)}
    return out
