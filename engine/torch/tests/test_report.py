"""`paper-repro model --torch` on a recorded example: the report times the
user's eager loop, bt.run with each sample's graph kept and without
(new sample objects every mini-batch), bt.run's discovery beside its floor
(the user's forward with the cells stubbed out), and the setup's
hand-written baselines; every system's loss equals the recording's."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from batchlab_torch.examples.data import molecules
from batchlab_torch.examples.ggnn import GGNN, cells
from batchlab_torch.examples.tree_lstm import TreeLSTM

from .conftest import run, tool
from .pipeline import record


def report(folder: Path, setup: str, out: Path) -> tuple[str, list[dict]]:
    repro = tool("paper-repro")
    run(repro, "--quick", "--out", str(out), "model", "--model", str(folder), "--torch", setup, "--rounds", "1")
    rows = [json.loads(line) for line in (out / "rows" / "model.jsonl").read_text().splitlines() if line.strip()]
    return (out / "REPORT.md").read_text(), rows


def test_model_report_shows_bt_run_with_and_without_the_cache(sst: tuple, tmp_path: Path) -> None:
    torch.manual_seed(0)
    m = TreeLSTM(hidden=8)
    record(m, {"leaf": m.leaf, "node": m.node, "out": m.out}, sst[1][:4], tmp_path / "m")
    md, rows = report(tmp_path / "m", "batchlab_torch.examples.tree_lstm:setup", tmp_path / "r")
    assert not [r for r in rows if r.get("error")], rows
    systems = {(r["mode"], r["system"]) for r in rows}
    for s in ("eager", "bt-fsm", "bt-fsm-nocache", "bt-depth-nocache", "levels"):
        assert ("inference", s) in systems and ("training", s) in systems, s
    # Discovery and its floor time a forward alone: no training rows.
    for s in ("discover", "floor"):
        assert ("inference", s) in systems and ("training", s) not in systems, s
    assert "bt.run's discovery of new samples ÷ its floor" in md, md
    assert "`bt-fsm-nocache` is" in md, md
    assert " ✗" not in md, md  # every loss equals the recording's


def test_ggnn_report_has_the_pyg_baseline(tmp_path: Path) -> None:
    if importlib.util.find_spec("torch_geometric") is None:
        pytest.skip("SKIPPED: torch_geometric is not installed: paper-repro peers --install --peers torch")
    torch.manual_seed(0)
    m = GGNN(hidden=8)
    record(m, cells(m), molecules(6, seed=2), tmp_path / "m")
    md, rows = report(tmp_path / "m", "batchlab_torch.examples.ggnn:setup", tmp_path / "r")
    assert not [r for r in rows if r.get("error")], rows
    assert any(r["system"] == "pyg" and r["mode"] == "training" for r in rows), rows
    assert "÷ the hand-written `pyg`" in md, md
    assert " ✗" not in md, md


def test_a_setup_that_prints_or_exits_is_named(tmp_path: Path) -> None:
    """Regression: a setup that printed to standard output broke the
    harness's answer ("JSON: expected value"), and one that called
    `sys.exit` ended it without a word about the setup."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    folder = root / "engine" / "core" / "tests" / "fixtures" / "model-tree"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(root / "paper-repro" / "peers"), str(root / "engine" / "torch")])
    )
    talk = tmp_path / "talk.py"
    talk.write_text(
        "from batchlab_torch.examples.tree_lstm import setup as example\n"
        "def setup(folder):\n    print('hello from the setup')\n    return example(folder)\n"
    )
    leave = tmp_path / "leave.py"
    leave.write_text("import sys\ndef setup(folder):\n    sys.exit(3)\n")

    def bench(setup: Path) -> subprocess.CompletedProcess:
        args = ["--setup", f"{setup}:setup", "--model", str(folder), "--list"]
        cmd = [sys.executable, "-m", "batchlab_peers.torch_bench", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)

    p = bench(talk)
    assert p.returncode == 0, p.stderr
    assert "eager" in json.loads(p.stdout)["systems"]
    assert "hello from the setup" in p.stderr
    p = bench(leave)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "the setup exited (sys.exit(3))" in p.stderr, p.stderr


def test_a_setup_that_hangs_or_runs_other_samples_fails_the_run(tmp_path: Path) -> None:
    """Regression: a setup that hung hung `paper-repro model`; one that
    returned other samples than the folder's (fewer, or as many but other
    ones) ended in exit 0, its throughput computed with the folder's count
    and its loss marked ✗ in a table. Each now fails the run, naming why."""
    repro = tool("paper-repro")
    root = Path(__file__).resolve().parents[3]
    folder = str(root / "engine" / "core" / "tests" / "fixtures" / "model-tree")
    example = "from batchlab_torch.examples.tree_lstm import setup as example\n"
    setups = {
        "hang": "import time\ndef setup(folder):\n    time.sleep(3600)\n",
        "fewer": example
        + "def setup(folder):\n    s = example(folder)\n    s['samples'] = s['samples'][:1]\n    return s\n",
        "other": example
        + "def setup(folder):\n    s = example(folder)\n    s['samples'] = [s['samples'][0]] * len(s['samples'])\n"
        + "    s.pop('baselines', None)\n    return s\n",
    }
    for name, text in setups.items():
        (tmp_path / f"{name}.py").write_text(text)

    def model_run(name: str, *extra: str) -> str:
        args = ["--quick", "--out", str(tmp_path / f"out-{name}"), "model", "--model", folder]
        args += ["--torch", f"{tmp_path / name}.py:setup", "--rounds", "1", "--no-train", *extra]
        p = run(repro, *args, ok=False)
        assert p.returncode == 1, (name, p.returncode, p.stderr)
        return p.stderr

    e = model_run("hang", "--timeout", "5")
    assert "ran past --timeout 5 s and was killed" in e, e
    e = model_run("fewer")
    assert "the setup returned 1 samples" in e and "recorded on 2" in e, e
    e = model_run("other")
    assert "rows failed" in e and "is not the recording's" in e, e
