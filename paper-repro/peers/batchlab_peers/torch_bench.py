"""Timing the user's own PyTorch model, one system per process: the worker
``paper-repro model`` starts for its PyTorch rows (``docs/torch.md``,
"The report").

::

    python -m batchlab_peers.torch_bench --setup FILE.py:FUNC --model DIR --system SYSTEM \\
        --repeats R --threads T --result OUT.json [--train 1]
    python -m batchlab_peers.torch_bench --setup FILE.py:FUNC --model DIR --list

``FUNC(DIR)`` (a function of a file, or ``package.module:FUNC``) returns a
dict: ``model`` (the user's module), ``cells`` (its marked submodules, as
for the recorder), ``samples`` (the samples the folder was recorded on) and
optionally ``baselines``, ``{name: fn(samples) -> per-sample losses}``
(hand-written batched programs to compare with). The model gets the
folder's weights (``weights.safetensors``), so every system computes the
same numbers as batchlab's executors.

Systems: ``eager`` (the user's loop, one sample at a time), ``bt-SCHEDULE``
(``bt.run`` by a batchlab schedule: ``bt-depth``, ``bt-agenda``, or
``bt-fsm`` with ``--policy P.yaml``; each sample's graph kept between
mini-batches), ``bt-SCHEDULE-nocache`` (the same with ``Runner(cache=False)``:
every mini-batch's samples discovered afresh, as new sample objects are),
each baseline by name, and two forward-only measurements of discovery's
cost: ``discover`` (bt.run's discovery of the mini-batch alone, cache off)
and ``floor`` (the user's forward with every marked module's ``forward``
replaced by a function returning cached tensors of its outputs' shapes: the
user's own Python, which discovery must run too). One untimed warm-up (it
also fills ``bt.run``'s per-sample cache), then ``--repeats`` timed
mini-batches; ``--train 1`` times the backward of the summed loss too
(refused for the forward-only systems). Every system runs with freed host memory kept in the
process (``batchlab_torch._running.memory.keep_freed_memory``, which ``bt.run``
sets for its users), so that no system pays page faults another does not.
The result: wall and process CPU seconds and minor page faults per repeat,
the loss, and for ``bt.run`` its batches and where its time went. Exit
status 0, or 2 with the error on standard error.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from batchlab_torch import Runner, Stats
from batchlab_torch._running.memory import keep_freed_memory


def load_setup(spec: str, folder: str) -> dict[str, Any]:
    """Runs the ``FILE.py:FUNC`` (or ``module:FUNC``) setup on ``folder``.
    What the setup prints goes to standard error (standard output carries
    this harness's answers), and a setup that exits is named as such."""
    where, _, func = spec.rpartition(":")
    if not where or not func:
        raise SystemExit(f"--setup {spec}: expected FILE.py:FUNC or module:FUNC")
    try:
        with contextlib.redirect_stdout(sys.stderr):
            if where.endswith(".py"):
                # As `python FILE.py` would: the file's folder first on the
                # path, so the setup imports the modules beside it.
                sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
                s = importlib.util.spec_from_file_location("batchlab_user_setup", where)
                if s is None or s.loader is None:
                    raise SystemExit(f"--setup {spec}: cannot load {where}")
                mod = importlib.util.module_from_spec(s)
                sys.modules["batchlab_user_setup"] = mod
                s.loader.exec_module(mod)
            else:
                mod = importlib.import_module(where)
            out = getattr(mod, func)(folder)
    except SystemExit as e:
        if isinstance(e.code, str) and e.code.startswith(f"--setup {spec}:"):
            raise
        raise SystemExit(
            f"--setup {spec}: the setup exited (sys.exit({e.code!r})) instead of returning its dict"
        ) from None
    if not isinstance(out, dict):
        raise SystemExit(
            f"--setup {spec}: the setup returned {type(out).__name__}, not a dict of model, cells, samples"
        )
    for key in ("model", "cells", "samples"):
        if key not in out:
            raise SystemExit(f"--setup {spec}: the setup's result has no {key!r}")
    # Every system's throughput is the folder's samples over its time, and
    # its loss is checked against the recording's: the setup must hand back
    # the samples the folder was recorded on.
    with open(os.path.join(folder, "model.json")) as f:
        recorded = json.load(f).get("instances")
    try:
        n = len(out["samples"])
    except TypeError:
        raise SystemExit(
            f"--setup {spec}: the setup's 'samples' is a {type(out['samples']).__name__}, not a list"
        ) from None
    if n != recorded:
        raise SystemExit(
            f"--setup {spec}: the setup returned {n} samples, but {folder} was recorded on {recorded} "
            "(model.json `instances`): return the samples the folder was recorded on"
        )
    return out


def load_weights(model: torch.nn.Module, folder: str) -> None:
    """The folder's weights into ``model``, by parameter name; every tensor
    of the file must be a parameter of the model, of its shape."""
    from safetensors.torch import load_file

    path = os.path.join(folder, "weights.safetensors")
    weights = load_file(path)
    params = dict(model.named_parameters())
    for name, t in weights.items():
        p = params.get(name)
        if p is None:
            raise SystemExit(f"{path}: tensor `{name}` is no parameter of the model the setup built")
        if tuple(p.shape) != tuple(t.shape):
            raise SystemExit(f"{path}: tensor `{name}` has shape {list(t.shape)}, the model's {list(p.shape)}")
        with torch.no_grad():
            p.copy_(t)


# Systems that time a forward alone, never a training step.
FORWARD_ONLY = ("floor", "discover")


def systems(setup: dict[str, Any]) -> list[str]:
    return [
        "eager",
        *FORWARD_ONLY,
        "bt-depth",
        "bt-agenda",
        "bt-fsm",
        "bt-depth-nocache",
        "bt-fsm-nocache",
        *sorted(setup.get("baselines", {})),
    ]


def stub_cells(setup: dict[str, Any]) -> None:
    """Replaces every marked module's ``forward`` by a function returning
    tensors of its outputs' shapes, made once: one real run of each sample
    notes each call's outputs by the call's argument shapes (the floor of
    discovery's cost is the user's own Python around the cells)."""
    model, samples = setup["model"], setup["samples"]
    outs: dict[int, dict[tuple, Any]] = {id(m): {} for m in setup["cells"].values()}

    def shapes(args: tuple) -> tuple:
        return tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else type(a) for a in args)

    def note(mod: torch.nn.Module, args: tuple, out: Any) -> None:
        outs[id(mod)].setdefault(shapes(args), _zeros_like(out))

    hooks = [m.register_forward_hook(note) for m in setup["cells"].values()]
    with torch.no_grad():
        for s in samples:
            model(s)
    for h in hooks:
        h.remove()
    for m in setup["cells"].values():
        table = outs[id(m)]
        only = next(iter(table.values())) if len(table) == 1 else None
        m.forward = (lambda *a, _o=only, **k: _o) if only is not None else (lambda *a, _t=table, **k: _t[shapes(a)])


def _zeros_like(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return torch.zeros_like(x)
    if isinstance(x, (tuple, list)):
        return type(x)(_zeros_like(i) for i in x)
    return x


def step_fn(setup: dict[str, Any], system: str, policy: str | None) -> tuple[Callable[[], Any], Runner | None]:
    model, samples = setup["model"], setup["samples"]
    if system == "eager":
        return (lambda: [model(s) for s in samples]), None
    if system == "floor":
        stub_cells(setup)
        return (lambda: [model(s) for s in samples]), None
    if system == "discover":
        runner = Runner(model, setup["cells"], cache=False)
        return (lambda: runner.discover(samples)), None
    if system.startswith("bt-"):
        sched = system[3:]
        cache = not sched.endswith("-nocache")
        sched = sched.removesuffix("-nocache")
        if sched == "fsm":
            if not policy:
                raise SystemExit(f"--system {system} needs --policy P.yaml")
            sched = policy
        runner = Runner(model, setup["cells"], cache=cache)
        return (lambda: runner.run(samples, sched)), runner
    base = setup.get("baselines", {}).get(system)
    if base is None:
        raise SystemExit(f"--system {system}: unknown (systems: {', '.join(systems(setup))})")
    return (lambda: base(samples)), None


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return (s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2) if n else float("nan")


def measure(setup: dict[str, Any], system: str, repeats: int, train: bool, policy: str | None) -> dict[str, Any]:
    model = setup["model"]
    if train and system in FORWARD_ONLY:
        raise SystemExit(f"--system {system} times a forward alone: give --train 0")
    fn, runner = step_fn(setup, system, policy)
    forward_only = system in FORWARD_ONLY

    def once() -> tuple[float, float, int, float, Stats | None]:
        model.zero_grad(set_to_none=True)
        f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t, c = time.perf_counter(), time.process_time()
        loss = None
        if train:
            loss = sum(fn())
            loss.backward()
        else:
            with torch.no_grad():
                out = fn()
                if not forward_only:
                    loss = sum(out)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f
        value = float("nan") if loss is None else float(loss.detach())
        return wall, cpu, faults, value, (runner.stats if runner is not None else None)

    once()  # warm-up: kinds learned, bt.run's per-sample cache filled
    walls, cpus, faults, stats = [], [], [], []
    loss = float("nan")
    for _ in range(repeats):
        w, c, pf, loss, s = once()
        walls.append(w)
        cpus.append(c)
        faults.append(pf)
        if s is not None:
            stats.append(s)
    out: dict[str, Any] = {
        "system": system,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "train": train,
        "instances": len(setup["samples"]),
        "samples": walls,
        "cpu_samples": cpus,
        "fault_samples": faults,
        "faults": median([float(f) for f in faults]),
        "keeps_freed": keep_freed_memory(),
        "total_s": median(walls),
        "cpu_s": median(cpus),
        "loss": loss if loss == loss else None,  # NaN (a forward-only system): no loss
    }
    if stats:
        out.update(
            batches=stats[-1].batches,
            misses=stats[-1].misses,
            deferred=stats[-1].deferred,
            nodes=stats[-1].nodes,
            discover_s=median([s.discover for s in stats]),
            schedule_s=median([s.schedule for s in stats]),
            execute_s=median([s.execute for s in stats]),
            direct_kinds=stats[-1].direct_kinds,
            rows_kinds=stats[-1].rows_kinds,
            vmap_kinds=stats[-1].vmap_kinds,
            loop_kinds=stats[-1].loop_kinds,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m batchlab_peers.torch_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--setup", required=True, help="FILE.py:FUNC or module:FUNC returning model, cells, samples")
    ap.add_argument("--model", required=True, help="the model folder (its weights are loaded)")
    ap.add_argument("--list", action="store_true", help="print the systems this setup offers (JSON) and exit")
    ap.add_argument("--system", help="eager, bt-depth, bt-agenda, bt-fsm, or a baseline of the setup")
    ap.add_argument("--policy", help="the FSM policy file for bt-fsm")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--train", default="0", choices=["0", "1"])
    ap.add_argument("--result", help="where to write the result (JSON, atomically)")
    a = ap.parse_args(argv)
    try:
        torch.set_num_threads(max(1, a.threads))
        keep_freed_memory()  # every system alike (bt.run's Runner would set it for itself)
        setup = load_setup(a.setup, a.model)
        if a.list:
            print(json.dumps({"systems": systems(setup), "forward_only": list(FORWARD_ONLY)}))
            return 0
        if not a.system or not a.result or a.repeats < 1:
            raise SystemExit("give --system, --result and --repeats >= 1 (or --list)")
        load_weights(setup["model"], a.model)
        r = measure(setup, a.system, a.repeats, a.train == "1", a.policy)
        tmp = f"{a.result}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(r, f)
        os.replace(tmp, a.result)
        return 0
    except SystemExit as e:
        if isinstance(e.code, str):
            print(f"error: {e.code}", file=sys.stderr)
            return 2
        raise
    except Exception as e:  # the user's code failed: say what, exit 2
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
