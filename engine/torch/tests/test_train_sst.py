"""The SST training loop (``examples/train_sst.py``): the eager loop and
bt.run train the same model the same way (same losses per epoch, same dev
accuracies), the report is what ``paper-repro training-curve`` reads, and
the SST reader names the file and line of a malformed line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from batchlab_torch._running.schedules import ScheduleError, find_tool
from batchlab_torch.examples.data import sst_split
from batchlab_torch.examples.train_sst import SSTDataset, find_data, main

from .conftest import run

SMALL = ["--limit", "40", "--dev-limit", "30", "--hidden", "16", "--epochs", "2", "--batch", "8", "--no-progress"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory, engine: str) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("train-sst")
    out = {}
    for mode in ("eager", "bt"):
        out[mode] = d / f"{mode}.json"
        main([*SMALL, "--mode", mode, "--out", str(out[mode])])
    return out


def test_eager_and_bt_train_alike(reports: dict[str, Path]) -> None:
    eager, bt = (json.loads(reports[m].read_text()) for m in ("eager", "bt"))
    assert (eager["executor"], bt["executor"]) == ("eager", "bt.run depth")
    assert len(eager["epochs"]) == len(bt["epochs"]) == 2
    for e, b in zip(eager["epochs"], bt["epochs"]):
        assert math.isclose(e["train_loss"], b["train_loss"], rel_tol=1e-4), (e, b)
        assert (e["dev_accuracy"], e["dev_node_accuracy"]) == (b["dev_accuracy"], b["dev_node_accuracy"])
        assert b["steps"] == 5 and b["batches_per_minibatch"] > 0
    # It learns something: the second epoch's loss is below the first's.
    assert eager["epochs"][1]["train_loss"] < eager["epochs"][0]["train_loss"]


def test_report_is_a_training_curve_report(reports: dict[str, Path], tmp_path: Path) -> None:
    r = json.loads(reports["bt"].read_text())
    # The fields and types paper-repro/src/training_curve.rs reads.
    assert isinstance(r["workload"], str) and isinstance(r["executor"], str)
    assert isinstance(r["batch"], int) and isinstance(r["hidden"], int) and isinstance(r["dev"], str)
    assert set(r["dev_majority"]) == {"root", "node"}
    assert all(0 < v <= 1 for v in r["dev_majority"].values())
    for i, e in enumerate(r["epochs"], start=1):
        assert e["epoch"] == i and e["seconds"] > 0
        assert all(isinstance(e[k], float) for k in ("train_loss", "dev_accuracy", "dev_node_accuracy"))
    try:
        repro = find_tool("paper-repro")
    except ScheduleError:
        return  # the schema check above stands; the drawing needs the binary
    args = [a for m in ("eager", "bt") for a in ("--report", str(reports[m]))]
    run(repro, "training-curve", *args, "--out", str(tmp_path))
    csv = (tmp_path / "training-curve.csv").read_text().splitlines()
    assert len(csv) == 1 + 2 * 2, csv


def test_dataset_builds_fresh_trees() -> None:
    trees = sst_split(find_data() / "sst-dev.trees")[:3]
    ds = SSTDataset(trees)
    a, b = ds[0], ds[0]
    assert a is not b and a.children[0] is not b.children[0] and a == b == trees[0]


def test_sst_reader_names_file_and_line_of_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.trees"
    path.write_text("# batchlab fixture v2 trees\n# samples: 2\n(1 (2 w43) (0 w5))\n(3 (2 w80) (3 w1170)\n")
    with pytest.raises(ValueError, match=r"bad\.trees:4: expected '\)' at column 21 \(end of line\)"):
        sst_split(path)
    path.write_text("# batchlab fixture v1 trees\n((xx)x)\n")
    with pytest.raises(ValueError, match=r"bad\.trees:1: a v1 .*needs v2"):
        sst_split(path)
    path.write_text("# batchlab fixture v2 trees\n(1 w007)\n")
    with pytest.raises(ValueError, match=r"bad\.trees:2: leading zero in word id at column 5"):
        sst_split(path)
    assert len(sst_split(find_data() / "sst-dev.trees")) == 1107
