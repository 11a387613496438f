"""The pipeline every example goes through: recorded, checked on every CPU
executor (forward and training), searched, planned, trained, and run by
bt.run under depth, agenda, the learned FSM and a `search optimise` schedule
file of the mini-batch, each against PyTorch."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import batchlab_torch as bt

from .conftest import grads, rel_err, run, run_json

EXECUTORS = ["reference", "dynet", "cavs", "policy", "edbatch", "edbatch-nolayout"]


def record(model: torch.nn.Module, cells: dict, samples: list, out: Path, loop: str = "summed") -> None:
    """The user's ~5 lines: mark the cells, run the own loop, save. The loop
    does what users do with the losses: ``summed``, ``averaged``, ``listed``
    or ``backward`` per sample."""
    rec = bt.Recorder(model, cells=cells)
    total = None
    with rec:
        if loop == "summed":
            total = sum(model(s) for s in samples)
        elif loop == "averaged":
            total = sum(model(s) for s in samples) / len(samples)
        elif loop == "listed":
            losses = [model(s) for s in samples]
            assert len(losses) == len(samples)
        else:
            for s in samples:
                model(s).backward()
    assert total is None or torch.isfinite(total)
    rec.save(str(out))


def check_loop_free_naming(
    engine: str, model: torch.nn.Module, cells: dict, samples: list, folder: Path, fsm: Path, tmp: Path
) -> int:
    """Whatever the loop does with the losses, the recording is the same
    (trace and roles), and bt.run makes exactly its graph: under the
    recording's FSM bt.run runs the very batches ``engine schedule
    --model`` gives, with the same deferred decisions and no miss (unless
    the policy is its fallback heuristic alone). Returns the batches."""
    want_trace = (folder / "trace.json").read_text()
    want_roles = json.loads((folder / "model.json").read_text())["roles"]
    for loop in ("averaged", "listed", "backward"):
        other = tmp / f"loop-{loop}"
        record(model, cells, samples, other, loop)
        assert (other / "trace.json").read_text() == want_trace, loop
        assert json.loads((other / "model.json").read_text())["roles"] == want_roles, loop
    model.zero_grad()
    sched = tmp / "schedule.json"
    r = run_json(engine, "schedule", "--model", str(folder), "--policy", str(fsm), "--out", str(sched))
    want = json.loads(sched.read_text())["batch_nodes"]
    runner = bt.Runner(model, cells, cache=False)
    got = runner.batches(samples, str(fsm))
    assert [b.tolist() for b in got] == want
    got_counts = (runner.stats.misses, runner.stats.deferred)
    assert got_counts == (r["misses"], r["deferred"]), (got_counts, r)
    if not any(line.startswith("fallback:") for line in fsm.read_text().splitlines()):
        assert runner.stats.misses == 0, runner.stats.misses
    return len(got)


def check_executors(engine: str, planner: str, folder: Path, tmp: Path) -> dict[str, float]:
    """`engine replay --check` on every CPU executor, forward and training;
    returns each one's max relative error against PyTorch."""
    layouts = tmp / "layouts"
    run(planner, "layout", "--model", str(folder), "--batch", "8", "--out-dir", str(layouts))
    errs = {}
    for ex in EXECUTORS:
        extra = ["--policy", "agenda"] if ex in ("policy", "edbatch", "edbatch-nolayout") else []
        if ex.startswith("edbatch"):
            extra += ["--layouts", str(layouts)]
        r = run_json(engine, "replay", "--model", str(folder), "--executor", ex, "--check", "--threads", "1", *extra)
        assert r["expected"]["passed"], r["expected"]
        errs[ex] = r["expected"]["max_rel_error"]
        if ex in ("reference", "cavs", "policy", "edbatch"):
            t = run_json(engine, "replay", "--model", str(folder), "--executor", ex, "--train", "--check", *extra)
            assert t["expected"]["passed"], t["expected"]
            assert t["expected_gradients"][0] <= 1e-4, t["expected_gradients"]
    return errs


def learn_fsm(search: str, folder: Path, tmp: Path) -> Path:
    fsm = tmp / "fsm.yaml"
    run(search, "train", "--trace", str(folder / "trace.json"), "--out", str(fsm))
    return fsm


def check_training(engine: str, folder: Path) -> list[float]:
    r = run_json(engine, "train", "--model", str(folder), "--epochs", "4", "--batch", "2", "--threads", "1")
    losses = [e["train_loss"] for e in r["epochs"]]
    assert losses[-1] < losses[0], losses
    return losses


def optimised_schedule(search: str, model: torch.nn.Module, cells: dict, samples: list, tmp: Path) -> Path:
    """A schedule file of this very mini-batch from ``search optimise``
    (the mini-batch's trace written by ``Runner.save_trace``)."""
    trace, best = tmp / "minibatch.json", tmp / "best.json"
    bt.Runner(model, cells).save_trace(samples, str(trace))
    run(search, "optimise", "--trace", str(trace), "--budget", "2s", "--out", str(best))
    return best


def check_bt_run(model: torch.nn.Module, cells: dict, samples: list, schedules: list[str]) -> dict[str, int]:
    """bt.run's outputs and gradients against the eager loop's, per
    schedule; returns each schedule's batch count."""
    model.zero_grad()
    eager = [model(s) for s in samples]
    sum(eager).backward()
    want = grads(model)
    batches = {}
    runner = bt.Runner(model, cells)
    for sch in schedules:
        model.zero_grad()
        outs = runner.run(samples, schedule=sch)
        assert len(outs) == len(samples)
        for o, e in zip(outs, eager):
            assert rel_err(o.detach(), e.detach()) <= 1e-4, (sch, float(o), float(e))
        sum(outs).backward()
        got = grads(model)
        for name, g in want.items():
            assert rel_err(got[name], g) <= 1e-4, (sch, name, rel_err(got[name], g))
        batches[sch] = runner.stats.batches
    with torch.no_grad():
        outs = runner.run(samples, schedule=schedules[0])
    for o, e in zip(outs, eager):
        assert rel_err(o, e.detach()) <= 1e-4
    return batches


def full(
    engine: str, search: str, planner: str, make: Callable[[], tuple[torch.nn.Module, dict]], samples: list, tmp: Path
) -> dict[str, Any]:
    torch.manual_seed(0)
    model, cells = make()
    folder = tmp / "model"
    record(model, cells, samples, folder)
    errs = check_executors(engine, planner, folder, tmp)
    fsm = learn_fsm(search, folder, tmp)
    check_loop_free_naming(engine, model, cells, samples, folder, fsm, tmp)
    losses = check_training(engine, folder)
    best = optimised_schedule(search, model, cells, samples, tmp)
    batches = check_bt_run(model, cells, samples, ["depth", "agenda", str(fsm), str(best)])
    assert batches[str(best)] <= batches["agenda"], batches
    return {"folder": folder, "errors": errs, "losses": losses, "batches": batches}
