"""Shared fixtures: batchlab's binaries (a test that needs one skips, saying
how to build it) and the SST trees of a built-in trace."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from batchlab_torch._running.schedules import ScheduleError, find_tool
from batchlab_torch.examples.data import Tree, sst_trees

torch.set_num_threads(1)


def tool(name: str) -> str:
    try:
        return find_tool(name)
    except ScheduleError as e:
        pytest.skip(f"SKIPPED: {e}")


@pytest.fixture(scope="session")
def engine() -> str:
    return tool("engine")


@pytest.fixture(scope="session")
def search() -> str:
    return tool("search")


@pytest.fixture(scope="session")
def planner() -> str:
    return tool("planner")


def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    """Runs a command; with ``ok`` it must succeed (its output is shown if not)."""
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=600)
    if ok and p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def run_json(*args: str) -> dict:
    return json.loads(run(*args, "--json").stdout)


@pytest.fixture(scope="session")
def sst(tmp_path_factory: pytest.TempPathFactory, engine: str) -> tuple[Path, list[Tree]]:
    """A built-in tree-lstm trace of 8 SST trees (hidden 16) and its trees."""
    path = tmp_path_factory.mktemp("sst") / "tree-lstm.json"
    run(
        engine, "record", "--workload", "tree-lstm", "--batch", "8", "--hidden", "16", "--seed", "7", "--out", str(path)
    )
    return path, sst_trees(str(path))


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Normwise relative difference, b the reference (as batchlab's checks)."""
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-6))


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p)) for n, p in model.named_parameters()}


def env_threads() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
