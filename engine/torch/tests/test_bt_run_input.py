"""bt.run given what users give it by mistake, or a changed sample: a
one-line error that says what to do, never a hang, a raw traceback from
inside the package or an old result."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import torch

import batchlab_torch as bt
from batchlab_torch.examples.data import Tree
from batchlab_torch.examples.tree_lstm import TreeLSTM

from .conftest import rel_err, run


def make() -> tuple[TreeLSTM, dict]:
    torch.manual_seed(0)
    m = TreeLSTM(hidden=8)
    return m, {"leaf": m.leaf, "node": m.node, "out": m.out}


def trees() -> list[Tree]:
    return [
        Tree(1, children=[Tree(2, word=3), Tree(0, word=4)]),
        Tree(3, children=[Tree(4, word=5), Tree(1, children=[Tree(2, word=6), Tree(2, word=7)])]),
    ]


def test_a_changed_sample_is_not_answered_from_its_first_run() -> None:
    """Regression: a sample's label, word or shape changed after a first
    bt.run returned the first run's values (the graph was cached)."""
    m, cells = make()
    samples = trees()
    runner = bt.Runner(m, cells)
    with torch.no_grad():
        runner.run(samples, "depth")
        samples[0].label = 4
        samples[1].children[0].word = 9
        samples[1].children[1].children.pop()
        samples[1].children[1].word = 8
        got = runner.run(samples, "depth")
        want = [m(s) for s in samples]
    for g, w in zip(got, want):
        assert rel_err(g, w) <= 1e-5, (float(g), float(w))


def test_a_pathlib_schedule_is_a_path(engine: str, tmp_path: Path) -> None:
    """Regression: ``schedule=pathlib.Path(...)`` raised AttributeError."""
    m, cells = make()
    samples = trees()
    runner = bt.Runner(m, cells)
    runner.save_trace(samples, str(tmp_path / "t.json"))
    run(engine, "schedule", "--trace", str(tmp_path / "t.json"), "--out", str(tmp_path / "s.json"))
    with torch.no_grad():
        got = runner.run(samples, tmp_path / "s.json")
        want = [m(s) for s in samples]
    assert runner.stats.batches == len(json.loads((tmp_path / "s.json").read_text())["batch_nodes"])
    assert all(rel_err(g, w) <= 1e-5 for g, w in zip(got, want))


def test_a_schedule_of_another_type_is_named() -> None:
    m, cells = make()
    with pytest.raises(bt.ScheduleError, match=r"schedule=3: give a policy's name"):
        bt.Runner(m, cells).run(trees(), 3)  # type: ignore[arg-type]


def test_no_samples_give_no_values() -> None:
    m, cells = make()
    assert bt.Runner(m, cells).run([], "depth") == []
    assert bt.run(m, [], cells=cells) == []


def test_a_node_id_past_the_mini_batch_in_a_schedule_file_is_named(tmp_path: Path) -> None:
    """Regression: a node id of 2^70 in a schedule file raised OverflowError from numpy."""
    m, cells = make()
    s = tmp_path / "s.json"
    runner = bt.Runner(m, cells)
    runner.batches(trees(), "depth")
    nodes = runner.stats.nodes
    s.write_text(
        json.dumps({"format": "batchlab-schedule", "nodes": nodes, "schedule": ["leaf[8]"], "batch_nodes": [[2**70]]})
    )
    with pytest.raises(bt.ScheduleError, match=rf"batch 0: node {2**70} is out of range \(this mini-batch has {nodes}"):
        runner.run(trees(), str(s))


def fake_engine(tmp_path: Path, body: str) -> str:
    p = tmp_path / "fake-engine"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("exec cat", "answered b'B "),  # echoes the request
        ("echo hello; exit 3", "answered b'hello"),
        ("exit 3", "stopped \\(exit status 3\\)"),
        ("exec sleep 30", "gave no answer in 1 s"),
    ],
)
def test_an_engine_that_is_not_batchlabs_is_named(
    body: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: BATCHLAB_ENGINE naming another program raised a JSON
    error from inside the package, or hung for ever."""
    monkeypatch.setenv("BATCHLAB_ENGINE", fake_engine(tmp_path, body))
    monkeypatch.setenv("BATCHLAB_SCHEDULE_TIMEOUT", "1")
    m, cells = make()
    with pytest.raises(bt.ScheduleError, match=f"{says}.*BATCHLAB_ENGINE must name batchlab's `engine` binary"):
        bt.Runner(m, cells).run(trees(), "depth")


def test_a_bad_schedule_timeout_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHLAB_SCHEDULE_TIMEOUT", "soon")
    m, cells = make()
    with pytest.raises(bt.ScheduleError, match="BATCHLAB_SCHEDULE_TIMEOUT=soon: give seconds"):
        bt.Runner(m, cells).run(trees(), "depth")


def test_an_unread_answer_is_not_given_to_the_next_mini_batch() -> None:
    """Regression: a mini-batch that failed between its schedule request
    and the answer left the answer in the service's pipe, and the next
    mini-batch read it as its own."""
    from batchlab_torch._running.plan import Plan

    m, cells = make()
    runner = bt.Runner(m, cells)
    runner.ask(Plan(runner.discover(trees()), runner.kind_list), "depth")  # sent, never read
    other = trees()[1:]
    with torch.no_grad():
        got = runner.run(other, "depth")
        want = [m(s) for s in other]
    assert len(got) == 1 and rel_err(got[0], want[0]) <= 1e-5


def test_a_policy_file_rewritten_between_calls_is_read_again(engine: str, search: str, tmp_path: Path) -> None:
    """Regression: the schedule service read a policy file once and kept it
    for the session, so a policy retrained into the same file went on
    scheduling with the old one. A file changed on disk starts a new
    service: rewritten as garbage, the next call fails naming it; written
    back, it runs again."""
    m, cells = make()
    samples = trees()
    runner = bt.Runner(m, cells)
    trace, policy = tmp_path / "t.json", tmp_path / "p.yaml"
    runner.save_trace(samples, str(trace))
    run(search, "train", "--trace", str(trace), "--episodes", "20", "--out", str(policy))
    good = policy.read_bytes()
    with torch.no_grad():
        want = [m(s) for s in samples]
        got = runner.run(samples, str(policy))
        assert all(rel_err(g, w) <= 1e-5 for g, w in zip(got, want))
        assert runner.stats.misses == 0
        policy.write_text("format: not-a-policy\n")
        with pytest.raises(bt.ScheduleError, match="p.yaml"):
            runner.run(samples, str(policy))
        policy.write_bytes(good)
        got = runner.run(samples, str(policy))
    assert all(rel_err(g, w) <= 1e-5 for g, w in zip(got, want))
    assert runner.stats.misses == 0
