"""Each lowering rule against PyTorch: a one-cell model whose cell uses the
rule is recorded, and batchlab's reference executor must reproduce
PyTorch's outputs, loss and gradients from the cell file alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import batchlab_torch as bt

from .conftest import run, run_json

H = 6


class Body(nn.Module):
    """A cell with a few weights; ``fn(self, x, h)`` is its body."""

    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.a = nn.Linear(H, 2 * H)
        self.b = nn.Linear(H, 2 * H, bias=False)
        self.w = nn.Parameter(torch.randn(H, H) / H)
        self.lstm = nn.LSTMCell(H, H)
        self.gru = nn.GRUCell(H, H)
        self.rnn = nn.RNNCell(H, H)
        self.norm = nn.LayerNorm(H)
        self.fn = fn

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return self.fn(self, x, h)


class Chain(nn.Module):
    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, H)
        self.cell = Body(fn)
        self.out = nn.Linear(H, 3)

    def forward(self, seq: list[int]) -> torch.Tensor:
        h = torch.zeros(1, H)
        for w in seq:
            h = self.cell(self.embed(torch.tensor([w])), h)
        return F.cross_entropy(self.out(h), torch.tensor([seq[0] % 3]))


BODIES: dict[str, Callable] = {
    "linear-add-chunk": lambda s, x, h: torch.tanh((s.a(x) + s.b(h)).chunk(2, dim=-1)[1]),
    "cat-split-narrow": lambda s, x, h: (
        torch.sigmoid(torch.cat([x, h], dim=1).narrow(1, 3, H)) * torch.split(s.a(h), H, dim=-1)[0]
    ),
    "getitem-slices": lambda s, x, h: torch.relu(s.a(x)[:, H:] - s.a(h)[0, :H]).squeeze(0).unsqueeze(0),
    "one-minus-mul": lambda s, x, h: (1 - torch.sigmoid(x)) * h + torch.sigmoid(x) * torch.tanh(x),
    "weight-products": lambda s, x, h: torch.tanh(x @ s.w.t() + (s.w @ h.reshape(H)).reshape(1, H)),
    "lstm-cell": lambda s, x, h: s.lstm(x, (h, h))[0],
    "lstm-cell-from-zeros": lambda s, x, h: s.lstm(x)[1] + h,
    "gru-cell": lambda s, x, h: s.gru(x, h),
    "gru-cell-from-zeros": lambda s, x, h: s.gru(x) + h,
    "rnn-cell": lambda s, x, h: s.rnn(x, h) + s.rnn(h),
    # A dropout that drops nothing is the identity, even in training mode.
    "dropout-p0-training": lambda s, x, h: F.dropout(torch.tanh(s.a(x)[:, :H]), 0.0, True) + nn.Dropout(0.0)(h),
    "layer-norm": lambda s, x, h: torch.tanh(s.norm(s.a(x)[:, :H]) + F.layer_norm(h, (H,))),
    "gelu": lambda s, x, h: F.gelu(s.a(x)[:, :H]) + nn.GELU()(h) * torch.sigmoid(x),
    "scale-exp": lambda s, x, h: (
        0.5 * torch.tanh(s.a(x)[:, :H])
        + torch.tanh(h) / 2
        - x * 2.0
        + torch.exp(-torch.tanh(h))
        + torch.neg(x).exp() * 0.1
    ),
    "average-of-a-sum": lambda s, x, h: (x + h) / 2 + (x + h + torch.tanh(h)) * (1 / 3),
    "stack-mean-sum": lambda s, x, h: torch.stack([x, h, torch.tanh(x)]).mean(0) + torch.stack([x, h]).sum(0),
    "softmax-dropout-view": lambda s, x, h: F.dropout(F.softmax(s.a(x)[:, :H], dim=-1), 0.5, False).view(1, H) + h,
    # torch.cat of [1, H] rows along dim 0 is a stack of the rows.
    "cat-rows-reduce-index": lambda s, x, h: (
        torch.cat([x, h, torch.tanh(x)], dim=0).mean(0, keepdim=True)
        + torch.cat([x, h]).sum(0) * torch.cat([h, x])[1:2]
        + torch.cat([h], 0).sum(dim=0)
    ),
    # Row-wise calls on such a stack, a row broadcast to every row: gates over children.
    "rowwise-on-a-stack": lambda s, x, h: (torch.sigmoid(F.linear(torch.cat([x, h]), s.w) + x) * torch.cat([x, h])).sum(
        0, keepdim=True
    ),
}


def recorded_with_layouts(body: str, seed: int, planner: str, tmp_path: Path) -> tuple[str, str]:
    """The one-cell model of ``BODIES[body]`` recorded into ``tmp_path/m``,
    and its planned layouts in ``tmp_path/layouts``."""
    torch.manual_seed(seed)
    m = Chain(BODIES[body])
    rec = bt.Recorder(m, cells={"cell": m.cell})
    with rec:
        sum(m(s) for s in [[1, 2, 3], [4, 5], [6, 7, 8, 9]])
    folder, layouts = str(tmp_path / "m"), str(tmp_path / "layouts")
    rec.save(folder)
    run(planner, "layout", "--model", folder, "--batch", "8", "--out-dir", layouts)
    return folder, layouts


@pytest.mark.parametrize("name", sorted(BODIES))
def test_rule_matches_pytorch(name: str, engine: str, tmp_path: Path) -> None:
    torch.manual_seed(3)
    m = Chain(BODIES[name])
    rec = bt.Recorder(m, cells={"cell": m.cell})
    with rec:
        sum(m(s) for s in [[1, 2, 3], [4, 5], [6, 7, 8, 9]])
    rec.save(str(tmp_path / "m"))
    r = run_json(engine, "replay", "--model", str(tmp_path / "m"), "--executor", "reference", "--train", "--check")
    assert r["expected"]["passed"], r["expected"]
    assert r["expected_gradients"][0] <= 1e-4, r["expected_gradients"]


def layouts_for(ex: str, layouts: str) -> list[str]:
    """``--layouts`` for the executors that read it (the others refuse it)."""
    return ["--layouts", layouts] if ex.startswith("edbatch") else []


def test_slices_of_a_bias_and_of_a_value_are_not_batched_together(engine: str, planner: str, tmp_path: Path) -> None:
    """A GRU cell without a state slices its gate pre-activation (a value)
    and its hidden bias (a parameter) alike; the planner put both slices in
    one in-cell batch, which edbatch read as all parameters (a panic) and
    edbatch-nolayout as all values (wrong numbers)."""
    folder, layouts = recorded_with_layouts("gru-cell-from-zeros", 3, planner, tmp_path)
    for ex, train in [("edbatch", False), ("edbatch", True), ("edbatch-nolayout", False)]:
        extra = ["--train"] if train else []
        r = run_json(
            engine,
            "replay",
            "--model",
            folder,
            "--executor",
            ex,
            "--policy",
            "agenda",
            "--layouts",
            layouts,
            "--check",
            *extra,
        )
        assert r["expected"]["passed"], (ex, r["expected"])


def test_division_by_zero_names_the_line(tmp_path: Path) -> None:
    torch.manual_seed(0)
    m = Chain(lambda s, x, h: torch.tanh(s.a(x)[:, :H]) / 0 + h)
    with pytest.raises(bt.RecordError) as e:
        rec = bt.Recorder(m, cells={"cell": m.cell})
        with rec:
            m([1, 2])
    assert "division by the constant 0" in str(e.value) and "test_lowering.py:" in str(e.value)


def test_division_by_a_tensor_stays_refused(tmp_path: Path) -> None:
    torch.manual_seed(0)
    m = Chain(lambda s, x, h: torch.tanh(s.a(x)[:, :H]) / torch.sigmoid(h))
    with pytest.raises(bt.RecordError) as e:
        rec = bt.Recorder(m, cells={"cell": m.cell})
        with rec:
            m([1, 2])
    assert "division by other than a constant" in str(e.value) and "test_lowering.py:" in str(e.value)


def test_constant_factors_negation_and_exp_record_as_scale_and_exp_and_train_on_every_executor(
    engine: str, planner: str, tmp_path: Path
) -> None:
    folder, layouts = recorded_with_layouts("scale-exp", 5, planner, tmp_path)
    cell = (tmp_path / "m" / "cells" / "cell.yaml").read_text()
    for want in ("op: scale", "factor: 0.5", "factor: -1.0", "factor: 2.0", "factor: 0.1", "op: exp"):
        assert want in cell, (want, cell)
    for ex in ("reference", "dynet", "cavs", "policy:agenda", "edbatch:agenda"):
        for extra in ((), ("--train",)):
            r = run_json(
                engine, "replay", "--model", folder, "--executor", ex, *layouts_for(ex, layouts), "--check", *extra
            )
            assert r["expected"]["passed"], (ex, extra, r["expected"])
            if extra:
                assert r["expected_gradients"][0] <= 1e-4, (ex, r["expected_gradients"])
    # The VPPS instruction set has both (SUMN of one argument; MAP1 exp).
    r = run_json(engine, "script", "--model", folder, "--emulate")
    assert r["emulation"]["max_rel_error_gradients"] <= 1e-4, r["emulation"]


def test_log_softmax_nll_is_a_pick_loss(engine: str, tmp_path: Path) -> None:
    class Loss(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(H, 4)

        def forward(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return F.nll_loss(F.log_softmax(self.proj(h), dim=-1), y)

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(9, H)
            self.loss = Loss()

        def forward(self, w: int) -> torch.Tensor:
            return self.loss(self.embed(torch.tensor([w])), torch.tensor([w % 4]))

    torch.manual_seed(0)
    m = M()
    rec = bt.Recorder(m, cells={"loss": m.loss})
    with rec:
        sum(m(w) for w in range(6))
    rec.save(str(tmp_path / "m"))
    # The cell's output is what each call returns, a loss: role `loss.loss`.
    cell = (tmp_path / "m" / "cells" / "loss.loss.yaml").read_text()
    assert "pick_loss" in cell
    r = run_json(engine, "replay", "--model", str(tmp_path / "m"), "--executor", "cavs", "--train", "--check")
    assert r["expected"]["passed"] and r["expected_gradients"][0] <= 1e-4


@pytest.mark.parametrize(
    "reshape",
    [
        lambda y: y.unsqueeze(0),
        lambda y: y.view(1),
        lambda y: y.reshape(1),
        lambda y: y.reshape(-1).unsqueeze(0).squeeze(0).flatten(),
    ],
    ids=["unsqueeze", "view", "reshape", "chain"],
)
def test_a_label_reshaped_inside_the_loss_cell_is_that_label(
    reshape: Callable[[torch.Tensor], torch.Tensor], engine: str, tmp_path: Path
) -> None:
    """Regression (issue 44, the recorder's small refusals):
    ``F.cross_entropy(logits.unsqueeze(0), target.unsqueeze(0))``, the
    commonest per-instance loss, was refused ("argument is an integer
    tensor") though a reshape keeps the value. A label reshaped is that
    label: it records, checks against PyTorch and trains, and bt.run equals
    the eager loop."""

    class Loss(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(H, 4)

        def forward(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(self.proj(h).view(-1).unsqueeze(0), reshape(y))

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(9, H)
            self.loss = Loss()

        def forward(self, ws: list[int]) -> torch.Tensor:
            return sum(self.loss(self.embed(torch.tensor(w)), torch.tensor(w % 4)) for w in ws)

    torch.manual_seed(0)
    m = M()
    samples = [[1, 2, 3], [4, 5], [6, 7, 8, 0]]
    rec = bt.Recorder(m, cells={"loss": m.loss})
    with rec:
        sum(m(s) for s in samples)
    rec.save(str(tmp_path / "m"))
    r = run_json(engine, "replay", "--model", str(tmp_path / "m"), "--executor", "cavs", "--train", "--check")
    assert r["expected"]["passed"] and r["expected_gradients"][0] <= 1e-4
    with torch.no_grad():
        got = bt.run(m, samples, cells={"loss": m.loss}, schedule="depth")
        want = [m(s) for s in samples]
    assert max(abs(float(g) - float(w)) for g, w in zip(got, want)) <= 1e-5 * max(abs(float(w)) for w in want)


def test_a_label_made_float_inside_the_cell_stays_refused(tmp_path: Path) -> None:
    """A label turned into floats is no longer a label: still refused,
    naming the line."""

    class Loss(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(H, 4)

        def forward(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return (self.proj(h) * y.float()).sum()

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(9, H)
            self.loss = Loss()

        def forward(self, w: int) -> torch.Tensor:
            return self.loss(self.embed(torch.tensor([w])), torch.tensor([w % 4]))

    m = M()
    rec = bt.Recorder(m, cells={"loss": m.loss})
    with pytest.raises(bt.RecordError, match=r"test_lowering.py:\d+.*integer tensor"):
        with rec:
            sum(m(w) for w in range(3))
        rec.save(str(tmp_path / "m"))


def test_gelu_runs_on_every_executor_and_the_vpps_emulator(engine: str, planner: str, tmp_path: Path) -> None:
    folder, layouts = recorded_with_layouts("gelu", 4, planner, tmp_path)
    assert "op: gelu" in (tmp_path / "m" / "cells" / "cell.yaml").read_text()
    for ex in ("reference", "dynet", "cavs", "policy:agenda", "edbatch:agenda"):
        r = run_json(
            engine, "replay", "--model", folder, "--executor", ex, *layouts_for(ex, layouts), "--train", "--check"
        )
        assert r["expected"]["passed"] and r["expected_gradients"][0] <= 1e-4, (ex, r["expected"])
    # The VPPS instruction set has it too: the emulated kernel's loss and gradients.
    r = run_json(engine, "script", "--model", folder, "--emulate")
    assert r["emulation"]["max_rel_error_gradients"] <= 1e-4, r["emulation"]


def test_gelu_in_its_tanh_approximation_names_the_line() -> None:
    torch.manual_seed(0)
    m = Chain(lambda s, x, h: F.gelu(s.a(x)[:, :H], approximate="tanh") + h)
    with pytest.raises(bt.RecordError) as e:
        rec = bt.Recorder(m, cells={"cell": m.cell})
        with rec:
            m([1, 2])
    assert "approximate='tanh'" in str(e.value) and "test_lowering.py:" in str(e.value)


def test_layer_norm_runs_on_every_executor_and_vpps_refuses_it_by_name(
    engine: str, planner: str, tmp_path: Path
) -> None:
    folder, layouts = recorded_with_layouts("layer-norm", 5, planner, tmp_path)
    assert "op: layer_norm" in (tmp_path / "m" / "cells" / "cell.yaml").read_text()
    for ex in ("reference", "dynet", "cavs", "policy:agenda", "edbatch:agenda"):
        r = run_json(
            engine, "replay", "--model", folder, "--executor", ex, *layouts_for(ex, layouts), "--train", "--check"
        )
        assert r["expected"]["passed"] and r["expected_gradients"][0] <= 1e-4, (ex, r["expected"])
    p = run(engine, "script", "--model", folder, "--emulate", ok=False)
    assert p.returncode != 0 and "`layer_norm`" in p.stderr and "VPPS instruction set" in p.stderr, p.stderr
