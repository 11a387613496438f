"""Bad models and bad model folders: a clear error naming what and where,
and nothing written half."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

import batchlab_torch as bt
from batchlab_torch.examples.tree_lstm import TreeLSTM

from .conftest import run, run_json


class Cell(nn.Module):
    def __init__(self, fn) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self, x)


class Chain(nn.Module):
    """A toy model: an embedding, then a cell over each step of a sequence."""

    def __init__(self, fn) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.cell = Cell(fn)
        self.keep: torch.Tensor | None = None

    def forward(self, seq: list[int]) -> torch.Tensor:
        h = self.embed(torch.tensor([seq[0]]))
        for _ in seq[1:]:
            h = self.cell(h)
        return h


def record(model: nn.Module, samples: list, out: Path) -> None:
    rec = bt.Recorder(model, cells={"cell": model.cell})
    with rec:
        for s in samples:
            model(s)
    rec.save(str(out))


def test_an_op_batchlab_cannot_express_names_module_op_and_line(tmp_path: Path) -> None:
    m = Chain(lambda self, x: torch.log(self.lin(x)))
    with pytest.raises(bt.RecordError) as e:
        record(m, [[1, 2, 3]], tmp_path / "m")
    msg = str(e.value)
    assert "cell `cell` (Cell)" in msg and "torch.log" in msg and "test_errors.py:" in msg, msg
    assert not (tmp_path / "m").exists()


def test_a_cell_whose_output_shape_changes_between_calls_is_refused(tmp_path: Path) -> None:
    calls = []

    def fn(self, x):  # type: ignore[no-untyped-def]
        calls.append(1)
        y = torch.tanh(self.lin(x))
        return y if len(calls) % 2 else torch.cat([y, y], dim=-1)[:, :4] + torch.zeros(1, 4)

    m = Chain(fn)
    with pytest.raises(bt.RecordError) as e:
        record(m, [[1, 2, 3, 4]], tmp_path / "m")
    assert "other torch calls than on its first call" in str(e.value) or "returned shapes" in str(e.value)


def test_a_cell_with_value_dependent_output_shapes_is_refused(tmp_path: Path) -> None:
    def fn(self, x):  # type: ignore[no-untyped-def]
        y = torch.tanh(self.lin(x))
        return y[:, : 2 + int(x.sum() > 0) * 2]

    m = Chain(fn)
    torch.manual_seed(1)
    with pytest.raises(bt.RecordError):
        record(m, [[i % 10 for i in range(12)]], tmp_path / "m")


def test_a_value_kept_across_samples_is_refused(tmp_path: Path) -> None:
    class Memory(Chain):
        def forward(self, seq: list[int]) -> torch.Tensor:
            h = self.embed(torch.tensor([seq[0]]))
            if self.keep is not None:
                h = self.cell(self.keep)
            self.keep = self.cell(h)
            return self.keep

    m = Memory(lambda self, x: torch.tanh(self.lin(x)))
    with pytest.raises(bt.RecordError) as e:
        record(m, [[1], [2]], tmp_path / "m")
    assert "reads a value recorded in sample 0" in str(e.value)


def test_a_tensor_computed_from_weights_outside_the_cells_is_refused(tmp_path: Path) -> None:
    class Shared(Chain):
        def forward(self, seq: list[int]) -> torch.Tensor:
            bias = torch.tanh(self.cell.lin.bias).reshape(1, 4)  # shared by every sample
            h = self.embed(torch.tensor([seq[0]]))
            return self.cell(h + bias)

    m = Shared(lambda self, x: torch.tanh(self.lin(x)))
    with pytest.raises(bt.RecordError) as e:
        record(m, [[1], [2]], tmp_path / "m")
    assert "computed from parameters outside every cell" in str(e.value)


def test_an_outside_float_input_is_refused(tmp_path: Path) -> None:
    class Outside(Chain):
        def forward(self, seq: list[int]) -> torch.Tensor:
            return self.cell(torch.randn(1, 4))

    m = Outside(lambda self, x: torch.tanh(self.lin(x)))
    with pytest.raises(bt.RecordError) as e:
        record(m, [[1]], tmp_path / "m")
    assert "no recorded call made" in str(e.value)


def test_save_refuses_a_folder_that_is_not_a_model_folder(tmp_path: Path) -> None:
    m = Chain(lambda self, x: torch.tanh(self.lin(x)))
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep me")
    with pytest.raises(bt.RecordError):
        record(m, [[1, 2]], tmp_path / "precious")
    assert (tmp_path / "precious" / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, sst: tuple) -> Path:
    out = tmp_path_factory.mktemp("errs") / "model"
    m = TreeLSTM(hidden=8)
    rec = bt.Recorder(m, cells={"leaf": m.leaf, "node": m.node, "out": m.out})
    with rec:
        sum(m(t) for t in sst[1][:2])
    rec.save(str(out))
    return out


def broken(folder: Path, tmp: Path) -> Path:
    dst = tmp / "broken"
    shutil.copytree(folder, dst)
    return dst


def replay_fails(engine: str, folder: Path, *needles: str) -> str:
    p = run(engine, "replay", "--model", str(folder), "--executor", "cavs", "--check", ok=False)
    assert p.returncode not in (0, 101) and p.returncode > 0, (p.returncode, p.stderr)
    assert "panicked" not in p.stderr, p.stderr
    for n in needles:
        assert n in p.stderr, (n, p.stderr)
    return p.stderr


def test_a_missing_tensor_is_named_with_its_file(engine: str, folder: Path, tmp_path: Path) -> None:
    d = broken(folder, tmp_path)
    w = load_file(str(d / "weights.safetensors"))
    del w["node.U_l.weight"]
    save_file(w, str(d / "weights.safetensors"))
    replay_fails(engine, d, "weights.safetensors", "node.U_l.weight")


def test_a_misnamed_tensor_is_named_with_its_file(engine: str, folder: Path, tmp_path: Path) -> None:
    d = broken(folder, tmp_path)
    w = load_file(str(d / "weights.safetensors"))
    w["leaf.iou.weights"] = w.pop("leaf.iou.weight")
    save_file(w, str(d / "weights.safetensors"))
    replay_fails(engine, d, "weights.safetensors", "leaf.iou.weight")


def test_a_wrong_shaped_tensor_is_named_with_its_file(engine: str, folder: Path, tmp_path: Path) -> None:
    d = broken(folder, tmp_path)
    w = load_file(str(d / "weights.safetensors"))
    w["out.proj.bias"] = torch.zeros(7)
    save_file(w, str(d / "weights.safetensors"))
    replay_fails(engine, d, "weights.safetensors", "out.proj.bias", "[7]", "[5]")


def test_a_truncated_safetensors_file_is_named(engine: str, folder: Path, tmp_path: Path) -> None:
    for name in ("weights.safetensors", "expected.safetensors"):
        d = broken(folder, tmp_path / name)
        data = (d / name).read_bytes()
        (d / name).write_bytes(data[: len(data) // 2])
        replay_fails(engine, d, name, "not a readable safetensors file")


def test_a_trace_type_no_role_has_is_a_mismatch(engine: str, folder: Path, tmp_path: Path) -> None:
    d = broken(folder, tmp_path)
    t = json.loads((d / "trace.json").read_text())
    t["types"][1]["name"] = "leaf[9]"
    (d / "trace.json").write_text(json.dumps(t))
    replay_fails(engine, d, "trace.json", "leaf[9]", "no role")


def test_a_missing_or_misnamed_cell_file_is_named(engine: str, folder: Path, tmp_path: Path) -> None:
    d = broken(folder, tmp_path / "missing")
    (d / "cells" / "node.yaml").unlink()
    replay_fails(engine, d, "node.yaml", "roles[")
    d = broken(folder, tmp_path / "misnamed")
    (d / "cells" / "node.yaml").write_text((d / "cells" / "leaf.yaml").read_text())
    replay_fails(engine, d, "node.yaml", "defines cell `leaf`")


def test_a_cell_whose_ports_disagree_with_the_manifest_is_named(engine: str, folder: Path, tmp_path: Path) -> None:
    d = broken(folder, tmp_path)
    m = json.loads((d / "model.json").read_text())
    role = next(r for r in m["roles"] if r["role"] == "node")
    role["ports"] = role["ports"][:1]
    (d / "model.json").write_text(json.dumps(m))
    replay_fails(engine, d, "model.json", "ports")


def test_a_zoo_name_is_refused(engine: str, folder: Path, tmp_path: Path) -> None:
    d = broken(folder, tmp_path)
    m = json.loads((d / "model.json").read_text())
    m["name"] = "tree-lstm"
    (d / "model.json").write_text(json.dumps(m))
    replay_fails(engine, d, "model.json", "built-in workload")


def test_a_zoo_name_is_refused_when_the_recorder_is_made(engine: str, tmp_path: Path) -> None:
    """Regression: ``Recorder(..., name="tree-lstm")`` recorded and saved a
    folder that every tool then refused. The recorder refuses the name when
    it is made, for every name ``engine workloads`` lists (and the package's
    list is that list)."""
    import subprocess

    from batchlab_torch._recording.tracer import ZOO_WORKLOADS

    listed = json.loads(subprocess.run([engine, "workloads", "--json"], capture_output=True, check=True).stdout)
    names = {w["name"] for w in listed}
    assert names == ZOO_WORKLOADS
    m = Chain(lambda self, x: torch.tanh(self.lin(x)))
    for n in sorted(names):
        with pytest.raises(bt.RecordError, match="built-in workload"):
            bt.Recorder(m, cells={"cell": m.cell}, name=n)
    with pytest.raises(bt.RecordError, match="non-empty"):
        bt.Recorder(m, cells={"cell": m.cell}, name="")
    rec = bt.Recorder(m, cells={"cell": m.cell}, name="tree-lstm-mine")
    with rec:
        m([1, 2])
    rec.save(str(tmp_path / "m"))
    assert json.loads((tmp_path / "m" / "model.json").read_text())["name"] == "tree-lstm-mine"


class Children(nn.Module):
    """A cell over a node's children's states; ``fn(self, x, hs)`` is its body."""

    def __init__(self, fn) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.att = nn.Linear(4, 1)
        self.norm = nn.LayerNorm(4)
        self.q = nn.Parameter(torch.randn(4))  # a learned attention query
        self.fn = fn

    def forward(self, x: torch.Tensor, hs: list[torch.Tensor]) -> torch.Tensor:
        return self.fn(self, x, hs)


class Star(nn.Module):
    """A root reading its leaves: the smallest tree with a variable arity."""

    def __init__(self, fn) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.cell = Children(fn)

    def forward(self, words: list[int]) -> torch.Tensor:
        xs = [self.embed(torch.tensor([w])) for w in words]
        return self.cell(xs[0], xs[1:])


# Common model code batchlab's op set cannot express (docs/torch.md, "What a
# cell may contain"): each is refused naming the module, the call and the line.
UNSUPPORTED = {
    "max-pooling": (lambda s, x, hs: torch.stack(hs).max(dim=0).values + x, "torch.Tensor.max"),
    "layer-norm-eps": (lambda s, x, hs: F.layer_norm(s.lin(x) + sum(hs), (s.lin.out_features,), eps=1e-6), "eps=1e-06"),
    "gelu-tanh": (lambda s, x, hs: F.gelu(s.lin(x), approximate="tanh"), "torch.nn.functional.gelu"),
    # A label made inside the cell from a Python int: the error says to pass it in.
    "tensor-from-python-int": (
        lambda s, x, hs: F.cross_entropy(s.lin(x)[:, :3], torch.tensor([len(hs) % 3])),
        "make it outside and pass it in",
    ),
    "attention": (
        lambda s, x, hs: (F.softmax(s.att(torch.cat(hs, dim=0)), dim=0) * torch.cat(hs, dim=0)).sum(0),
        "dot-product attention",
    ),
    "log-softmax-output": (lambda s, x, hs: F.log_softmax(s.lin(x), dim=-1), "torch.nn.functional.log_softmax"),
    # Regression (issue 44): with a learned 1-D query the error blamed the
    # product's orientation and suggested F.linear, which only led to the
    # real refusal; the stack is named first.
    "attention-learned-query": (
        lambda s, x, hs: (F.softmax(torch.cat(hs, dim=0) @ s.q, dim=0)[:, None] * torch.cat(hs, dim=0)).sum(0),
        "a product with a stack of 2 rows (the scores of dot-product attention",
    ),
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_an_op_a_common_model_needs_is_refused_at_its_line(name: str, tmp_path: Path) -> None:
    fn, what = UNSUPPORTED[name]
    m = Star(fn)
    with pytest.raises(bt.RecordError) as e:
        record(m, [[1, 2, 3]], tmp_path / "m")
    msg = str(e.value)
    assert "cell `cell` (Children)" in msg and what in msg and "test_errors.py:" in msg, msg
    assert "? at ?" not in msg, msg


def test_a_log_softmax_read_by_other_than_nll_loss_names_both_lines(tmp_path: Path) -> None:
    class Scores(Chain):
        def forward(self, seq: list[int]) -> torch.Tensor:
            logp = F.log_softmax(self.cell(self.embed(torch.tensor([seq[0]]))), dim=-1)
            return (logp * logp).sum()

    m = Scores(lambda self, x: torch.tanh(self.lin(x)))
    with pytest.raises(bt.RecordError) as e:
        record(m, [[1]], tmp_path / "m")
    msg = str(e.value)
    assert "torch.Tensor.mul reads the log_softmax made at " in msg and msg.count("test_errors.py:") == 2, msg


def test_a_constant_loss_weight_between_cells_is_a_scale_op(engine: str, tmp_path: Path) -> None:
    class Weighted(Chain):
        def forward(self, seq: list[int]) -> torch.Tensor:
            h = self.cell(self.embed(torch.tensor([seq[0]])))
            return 0.1 * F.cross_entropy(h, torch.tensor([1]))

    m = Weighted(lambda self, x: torch.tanh(self.lin(x)))
    record(m, [[1], [2, 3]], tmp_path / "m")
    cells = "".join(p.read_text() for p in (tmp_path / "m" / "cells").glob("*.yaml"))
    assert "op: scale" in cells and "factor: 0.1" in cells, cells
    r = run_json(engine, "replay", "--model", str(tmp_path / "m"), "--executor", "cavs", "--train", "--check")
    assert r["expected"]["passed"] and r["expected_gradients"][0] <= 1e-4, r["expected"]


def test_save_over_a_model_folder_keeps_the_users_other_files(tmp_path: Path) -> None:
    """Regression: saving over a model folder deleted what the user kept in
    it (a policy, a report)."""
    m = Chain(lambda self, x: torch.tanh(self.lin(x)))
    out = tmp_path / "m"
    record(m, [[1, 2]], out)
    (out / "policy.yaml").write_text("mine")
    (out / "reports").mkdir()
    (out / "reports" / "r.md").write_text("also mine")
    record(m, [[1, 2, 3]], out)
    assert (out / "policy.yaml").read_text() == "mine"
    assert (out / "reports" / "r.md").read_text() == "also mine"
    assert (out / "model.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_save_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    """Regression: saving to a path that is a symbolic link replaced the
    link by a folder."""
    m = Chain(lambda self, x: torch.tanh(self.lin(x)))
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    record(m, [[1, 2]], tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert (tmp_path / "real" / "model.json").is_file()
    record(m, [[1, 2, 3]], tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def test_sigterm_during_a_save_leaves_no_temporary_folder(tmp_path: Path) -> None:
    """Regression: SIGTERM during Recorder.save left `.NAME.tmp-PID` behind
    (SIGINT cleaned up)."""
    import subprocess
    import sys

    script = f"""
import os, signal, sys, torch
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from tests.test_errors import Chain, record
import batchlab_torch._recording.folder as folder
real = folder.safetensors_bytes
def stop(*a, **k):
    os.kill(os.getpid(), signal.SIGTERM)
    return real(*a, **k)
folder.safetensors_bytes = stop
m = Chain(lambda self, x: torch.tanh(self.lin(x)))
record(m, [[1, 2]], {str(tmp_path / "m")!r})
"""
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert p.returncode == 128 + 15, (p.returncode, p.stderr)
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_one_recorder_saved_twice_writes_the_same_folder(tmp_path: Path) -> None:
    """Issue 45 reported an IndexError on a Recorder's second save: a second
    save (to another path or the same one) writes the same bytes, and
    recording more samples after a save extends the recording."""
    m = Chain(lambda self, x: torch.tanh(self.lin(x)))
    rec = bt.Recorder(m, cells={"cell": m.cell})
    with rec:
        for s in [[1, 2, 3], [4, 5]]:
            m(s)
    rec.save(str(tmp_path / "a"))
    rec.save(str(tmp_path / "b"))
    rec.save(str(tmp_path / "a"))
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    with rec:
        m([6, 7])
    rec.save(str(tmp_path / "c"))
    assert json.loads((tmp_path / "c" / "model.json").read_text())["instances"] == 3
