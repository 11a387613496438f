"""Example (c): a DAG-RNN with a GRU cell per node kind (nn.GRUCell, lowered
to batchlab's ops) over `search random-dag` graphs."""

from __future__ import annotations

from pathlib import Path

import torch

from batchlab_torch.examples.dag_rnn import DagRNN
from batchlab_torch.examples.data import random_dags

from .conftest import run
from .pipeline import full


def make() -> tuple[torch.nn.Module, dict]:
    m = DagRNN(kinds=5, hidden=16)
    return m, {f"kind{i}": c for i, c in enumerate(m.cells)}


def test_dag_rnn_goes_through_the_pipeline(engine: str, search: str, planner: str, tmp_path: Path) -> None:
    dag = tmp_path / "dag.json"
    run(search, "random-dag", "--nodes", "240", "--types", "5", "--seed", "3", "--out", str(dag))
    dags = random_dags(str(dag), 30)
    r = full(engine, search, planner, make, dags, tmp_path)
    assert r["batches"]["agenda"] > 0
