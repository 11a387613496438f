"""Example (e): a gated graph network (Li et al. 2016) over synthetic
molecule-like graphs, written node by node: a message role per bond type,
the GRU update and the gated readout as cells. Its PyTorch Geometric twin,
on the same modules, must compute the same losses and gradients."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from batchlab_torch.examples.data import BONDS, Molecule, molecules
from batchlab_torch.examples.ggnn import GGNN, cells, setup

from .conftest import grads, rel_err, run_json
from .pipeline import full


def make() -> tuple[torch.nn.Module, dict]:
    m = GGNN(hidden=16)
    return m, cells(m)


def in_edges(mol: Molecule) -> list[list[tuple[int, int]]]:
    """Each atom's incoming (source, bond type), in the order the model sums them."""
    into: list[list[tuple[int, int]]] = [[] for _ in mol.atoms]
    for src, dst, bond in mol.edges:
        into[dst].append((src, bond))
    return into


def test_molecules_are_deterministic_and_molecule_like() -> None:
    mols = molecules(64, seed=3)
    assert mols == molecules(64, seed=3) and mols != molecules(64, seed=4)
    for mol in mols:
        assert 8 <= len(mol.atoms) <= 30
        degree = [len(e) for e in in_edges(mol)]
        assert min(degree) >= 1 and max(degree) <= 4, degree
        assert sorted((d, s, t) for s, d, t in mol.edges) == sorted(mol.edges)  # both directions
    assert len({m.label for m in mols}) == 4


def test_ggnn_goes_through_the_pipeline(engine: str, search: str, planner: str, tmp_path: Path) -> None:
    mols = molecules(16, seed=1)
    r = full(engine, search, planner, make, mols, tmp_path)
    folder = str(r["folder"])
    roles = {x["role"]: x["nodes"] for x in run_json(engine, "inspect", "--model", folder)["roles"]}
    # One message node per directed bond and step, one update per atom and step.
    steps, atoms = 3, sum(len(m.atoms) for m in mols)
    assert sum(roles.get(f"msg{t}", 0) for t in range(len(BONDS))) == steps * sum(len(m.edges) for m in mols)
    assert roles["update"] == steps * atoms and roles["readout"] == atoms, roles
    # The example's setup rebuilds the recorded molecules from the folder.
    s = setup(folder)
    assert s["model"].steps == steps
    got = s["samples"]
    assert [(m.atoms, in_edges(m), m.label) for m in got] == [(m.atoms, in_edges(m), m.label) for m in mols]
    if "pyg" in s.get("baselines", {}):  # the report's PyG baseline runs the setup's own model
        eager = [s["model"](m) for m in got]
        for b, e in zip(s["baselines"]["pyg"](got), eager):
            assert rel_err(b.detach(), e.detach()) <= 1e-4, (float(b), float(e))


def test_pyg_twin_equals_the_eager_loop() -> None:
    if importlib.util.find_spec("torch_geometric") is None:
        pytest.skip("SKIPPED: torch_geometric is not installed: paper-repro peers --install --peers torch")
    from batchlab_torch.examples.ggnn_pyg import PygGGNN

    torch.manual_seed(0)
    model = GGNN(hidden=16)
    mols = molecules(16, seed=1)
    eager = [model(m) for m in mols]
    sum(eager).backward()
    want = grads(model)
    twin = PygGGNN(model)
    for _ in range(2):  # the second mini-batch reads the cached Data
        model.zero_grad()
        losses = twin(mols)
        assert len(losses) == len(mols)
        for got, e in zip(losses, eager):
            assert rel_err(got.detach(), e.detach()) <= 1e-4, (float(got), float(e))
        sum(losses).backward()
        for name, g in grads(model).items():
            assert rel_err(g, want[name]) <= 1e-4, (name, rel_err(g, want[name]))
