"""The peers: DyNet (autobatch off or agenda) and PyTorch eager, loading an
export's parameters and running its generated program.

Timed region per run, what the framework's users pay per mini-batch:

- DyNet: ``renew_cg``, building every node's expressions (construction),
  then ``value()`` of the loss (forward: DyNet's autobatch scheduling, if on,
  and execution).
- PyTorch: the eager forward under ``torch.inference_mode()``; eager
  execution has no separate construction step, so it is reported as null.

Training (``train=True``): the same, then the backward of the summed loss
(DyNet ``backward()``, PyTorch ``backward()``), timed as ``backward_s``; no
optimiser update (batchlab's training step has none either). The first
step's parameter gradients are compared with the reference executor's from
the export (``grad_rel_err``: per tensor max |a - b| / max |b|, the largest).
"""

import gc
import time
from importlib import metadata

from . import codegen
from .program import Program

PEERS = (
    "dynet-none",
    "dynet-agenda",
    "torch",
    "torch-levels",
    "torch-depth",
    "torch-agenda",
    "torch-fsm",
    "dgl",
    "dgl-pull",
)
#: The peers that run PyTorch batched by a schedule (:mod:`batchlab_peers.batched`).
BATCHED = {"torch-depth": "depth", "torch-agenda": "agenda", "torch-fsm": "fsm"}


class PeerUnavailable(Exception):
    """The peer's framework cannot be imported (the message says why)."""


def framework_of(peer):
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}: expected one of {', '.join(PEERS)}")
    return "torch" if peer.startswith("torch") else "dgl" if peer.startswith("dgl") else "dynet"


def probe(framework):
    """(version, None) if ``framework`` is installed, else (None, why). Reads
    package metadata only: importing DyNet would initialise it, importing
    PyTorch takes seconds."""
    import importlib.util

    module, dist = {"dynet": ("dynet", "dyNET38"), "torch": ("torch", "torch"), "dgl": ("dgl", "dgl")}[framework]
    try:
        if importlib.util.find_spec(module) is None:
            return None, f"No module named {module!r}"
        return metadata.version(dist), None
    except Exception as e:  # a broken installation makes the peer unavailable
        return None, f"{type(e).__name__}: {e}"


def forward_mem_mb(export):
    """Forward memory for DyNet's pool: every op result three times over
    (results, gathered operands, scratch) plus 64 MB, at least 256 MB.
    Autobatching cannot grow the pool, so it is sized up front."""
    per_role = []
    for r in export.roles:
        n = 0
        for o in r["ops"]:
            k = 1
            for d in o["shape"]:
                k *= d
            n += k
        per_role.append(n)
    floats = sum(per_role[n["role"]] for n in export.nodes)
    return max(256, int(3 * 4 * floats / 2**20) + 64)


class DynetPeer:
    """DyNet with ``autobatch`` 0 (none) or 1 (agenda); ``profiling`` 2 makes
    DyNet print every executed batch (used only by the batch count)."""

    framework = "dynet"

    def __init__(self, export, autobatch, profiling=0, train=False):
        try:
            import dynet_config

            params_mb = max(16, int(4 * export.data_floats / 2**20) * 2 + 16)
            # Autobatching cannot grow a pool, so training sizes the backward
            # pool (every node's gradient) as the forward's.
            fwd = forward_mem_mb(export)
            mem = f"{fwd},{fwd if train else 16},{params_mb},64"
            dynet_config.set(mem=mem, autobatch=autobatch, profiling=profiling, random_seed=1)
            import dynet as dy
        except ImportError as e:
            raise PeerUnavailable(f"{type(e).__name__}: {e}") from None
        self.dy = dy
        self.train = train
        self.name = "dynet-agenda" if autobatch else "dynet-none"
        self.version = metadata.version("dyNET38")
        self.program = Program(export, "dynet")
        self.makers = self.program.factories({"dy": dy})
        pc = dy.ParameterCollection()
        self.pc = pc
        self.params = []
        for role in export.roles:
            tables = codegen.lookup_tables(role)
            ps = {}
            for p in role["params"]:
                arr = export.param(p)
                if p["name"] in tables:
                    ps[p["name"]] = (True, pc.lookup_parameters_from_numpy(arr))
                else:
                    ps[p["name"]] = (False, pc.parameters_from_numpy(arr))
            self.params.append(ps)

    def run_once(self):
        dy = self.dy
        t0, c0 = time.perf_counter(), time.process_time()
        dy.renew_cg()
        zs = {}

        def zeros(shape):
            z = zs.get(shape)
            if z is None:
                z = zs[shape] = dy.zeros(shape)
            return z

        fns = []
        for make, ps in zip(self.makers, self.params):
            fns.append(make({k: (v if table else v.expr(True)) for k, (table, v) in ps.items()}))
        losses = self.program.build(fns, zeros, dy.esum)
        if not self.train:
            t1 = time.perf_counter()
            loss = sum(x.value() for x in losses)
            t2, c2 = time.perf_counter(), time.process_time()
            return {
                "construction_s": t1 - t0,
                "forward_s": t2 - t1,
                "backward_s": None,
                "total_s": t2 - t0,
                "cpu_s": c2 - c0,
                "loss": float(loss),
            }
        total = dy.esum(losses)
        t1 = time.perf_counter()
        loss = total.value()
        t2 = time.perf_counter()
        total.backward()
        t3, c3 = time.perf_counter(), time.process_time()
        return {
            "construction_s": t1 - t0,
            "forward_s": t2 - t1,
            "backward_s": t3 - t2,
            "total_s": t3 - t0,
            "cpu_s": c3 - c0,
            "loss": float(loss),
        }

    def gradients(self):
        """Per role and parameter: (spec, gradient array) after the runs so
        far (DyNet accumulates until an update; call after one step)."""
        out = []
        for role, ps in zip(self.program.export.roles, self.params):
            for spec in role["params"]:
                _, p = ps[spec["name"]]
                out.append((role["role"], spec, p.grad_as_array()))
        return out


class TorchPeer:
    """PyTorch eager, one node at a time, inference mode."""

    framework = "torch"

    def __init__(self, export, threads, train=False, device="cpu"):
        torch, self.device, self.sync = open_torch(threads, device)
        self.torch = torch
        self.train = train
        self.name = "torch"
        self.version = torch.__version__
        self.program = Program(export, "torch")
        self.makers = self.program.factories({"torch": torch})
        self.params = torch_params(torch, export, train, self.device)

    def run_once(self):
        if self.train:
            return self.train_once()
        torch = self.torch
        t0, c0 = time.perf_counter(), time.process_time()
        with torch.inference_mode():
            zs = {}

            def zeros(shape):
                z = zs.get(shape)
                if z is None:
                    z = zs[shape] = torch.zeros(shape, device=self.device)
                return z

            fns = [make(ps) for make, ps in zip(self.makers, self.params)]
            losses = self.program.build(fns, zeros, lambda xs: torch.stack(xs).sum(0))
            # One read of the device (it waits for it), summed in double as
            # Python's sum of the losses' floats is.
            loss = float(torch.stack([x.sum() for x in losses]).double().sum())
        t2, c2 = time.perf_counter(), time.process_time()
        return {
            "construction_s": None,
            "forward_s": t2 - t0,
            "backward_s": None,
            "total_s": t2 - t0,
            "cpu_s": c2 - c0,
            "loss": loss,
        }

    def train_once(self):
        torch = self.torch
        for ps in self.params:
            for p in ps.values():
                p.grad = None
        t0, c0 = time.perf_counter(), time.process_time()
        zs = {}

        def zeros(shape):
            z = zs.get(shape)
            if z is None:
                z = zs[shape] = torch.zeros(shape, device=self.device)
            return z

        fns = [make(ps) for make, ps in zip(self.makers, self.params)]
        losses = self.program.build(fns, zeros, lambda xs: torch.stack(xs).sum(0))
        total = torch.stack([x.sum() for x in losses]).sum()
        self.sync()
        t1 = time.perf_counter()
        total.backward()
        self.sync()
        t2, c2 = time.perf_counter(), time.process_time()
        return {
            "construction_s": None,
            "forward_s": t1 - t0,
            "backward_s": t2 - t1,
            "total_s": t2 - t0,
            "cpu_s": c2 - c0,
            "loss": float(total.detach()),
        }

    def gradients(self):
        """Per role and parameter: (spec, gradient array) of the last step."""
        return torch_gradients(self.program.export.roles, self.params)


class TorchBatchedPeer:
    """PyTorch batched by a schedule (``torch-depth``, ``torch-agenda``,
    ``torch-fsm``): the export's cells as row-wise modules, run by
    ``batchlab_torch.Runner`` (:mod:`batchlab_peers.batched`). ``fsm`` is the
    policy file ``torch-fsm`` runs."""

    framework = "torch"

    def __init__(self, peer, export, trace, threads, train=False, fsm=None, device="cpu"):
        try:
            import torch
            from batchlab_torch import Runner
            from batchlab_torch._running.schedules import find_tool

            self.engine = find_tool("engine")  # the schedules are batchlab's
        except Exception as e:
            raise PeerUnavailable(f"{type(e).__name__}: {e}") from None
        from .batched import ModelFromExport

        self.torch = torch
        self.train = train
        torch.set_num_threads(threads)
        self.device, self.sync = torch_device(torch, device)
        self.name = peer
        self.version = torch.__version__
        self.schedule = fsm if BATCHED[peer] == "fsm" else BATCHED[peer]
        if self.schedule is None:
            raise ValueError("torch-fsm needs its policy (--fsm-trace and --fsm-export to learn it)")
        self.made = ModelFromExport(export, trace, train)
        self.made.model.to(self.device)  # bt.run runs where the model's parameters are
        self.program = Program(export, "torch-rows")
        self.params = self.made.params
        # The samples are tuples of node ids (they never change): their graphs are kept.
        self.runner = Runner(
            self.made.model, self.made.cells, name=export.header["workload"], engine=self.engine, cache=True
        )

    def run_once(self):
        torch = self.torch
        samples = self.made.samples
        if self.train:
            for ps in self.params:
                for p in ps.values():
                    p.grad = None
        t0, c0 = time.perf_counter(), time.process_time()
        if self.train:
            total = torch.stack(self.runner.run(samples, self.schedule)).sum()
            self.sync()
            t1 = time.perf_counter()
            total.backward()
            self.sync()
        else:
            with torch.inference_mode():
                total = torch.stack(self.runner.run(samples, self.schedule)).sum()
            self.sync()
            t1 = time.perf_counter()
        t2, c2 = time.perf_counter(), time.process_time()
        st = self.runner.stats
        return {
            "construction_s": st.discover + st.schedule,
            "forward_s": t1 - t0,
            "backward_s": t2 - t1 if self.train else None,
            "total_s": t2 - t0,
            "cpu_s": c2 - c0,
            "loss": float(total.detach()),
            "batches": st.batches,
        }

    def gradients(self):
        """Per role and parameter: (spec, gradient array) of the last step."""
        return torch_gradients(self.program.export.roles, self.params)


def learn_fsm(fsm_export, fsm_trace, out, episodes, seed, encoding="all"):
    """The FSM ``torch-fsm`` runs: ``search train`` (``encoding``; ``all``
    keeps the best) on the graph PyTorch runs for the FSM's training trace
    (``fsm_trace`` with its export ``fsm_export``), as batchlab's own FSM is
    learned on that trace."""
    import subprocess
    import tempfile

    try:
        from batchlab_torch import Runner
        from batchlab_torch._running.schedules import find_tool

        search = find_tool("search")
    except Exception as e:
        raise PeerUnavailable(f"{type(e).__name__}: {e}") from None
    from .batched import ModelFromExport

    made = ModelFromExport(fsm_export, fsm_trace, False)
    runner = Runner(made.model, made.cells, name=fsm_export.header["workload"])
    with tempfile.TemporaryDirectory() as d:
        graph = f"{d}/graph.json"
        runner.save_trace(made.samples, graph)
        cmd = [
            search,
            "train",
            "--trace",
            graph,
            "--encoding",
            encoding,
            "--episodes",
            str(episodes),
            "--seed",
            str(seed),
            "--out",
            out,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise ValueError(f"search train on PyTorch's graph of {fsm_trace}: {done.stderr.strip()}")
    return out


def torch_params(torch, export, train, device="cpu"):
    """Per role, its parameters as PyTorch tensors by name on ``device``
    (leaves that collect gradients when ``train``)."""
    return [
        {
            p["name"]: torch.from_numpy(export.param(p)).contiguous().to(device).requires_grad_(train)
            for p in role["params"]
        }
        for role in export.roles
    ]


def open_torch(threads, device):
    """PyTorch for a peer: the module, set to ``threads`` threads, the
    ``torch.device`` and the function that waits for it
    (:func:`torch_device`); a missing or broken PyTorch is
    :class:`PeerUnavailable`."""
    try:
        import torch
    except Exception as e:
        raise PeerUnavailable(f"{type(e).__name__}: {e}") from None
    torch.set_num_threads(threads)
    return (torch, *torch_device(torch, device))


def torch_device(torch, device):
    """``device`` as a ``torch.device``, refused where PyTorch cannot use it,
    and the function that waits for it (a CUDA step is timed to its end)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise PeerUnavailable(f"--device {device}: PyTorch {torch.__version__} sees no CUDA device here")
        return dev, lambda: torch.cuda.synchronize(dev)
    if dev.type != "cpu":
        raise ValueError(f"--device {device}: expected cpu, cuda or cuda:N")
    return dev, lambda: None


def timed_step(torch, forward, train, leaves, batches, sync=None, inference=None):
    """One timed mini-batch of a PyTorch-based peer, as ``run_once``
    returns it: the gradients of ``leaves`` (dicts of tensors) cleared, then
    ``forward()`` (the summed loss) timed, under ``inference`` (default
    ``torch.inference_mode()``) unless ``train``, where its backward is timed
    apart; ``sync`` waits for the device before each clock read."""
    if train:
        for ps in leaves:
            for p in ps.values():
                p.grad = None
    wait = sync or (lambda: None)
    t0, c0 = time.perf_counter(), time.process_time()
    if train:
        total = forward()
        wait()
        t1 = time.perf_counter()
        total.backward()
        wait()
    else:
        with inference if inference is not None else torch.inference_mode():
            total = forward()
        wait()
        t1 = time.perf_counter()
    t2, c2 = time.perf_counter(), time.process_time()
    return {
        "construction_s": None,
        "forward_s": t1 - t0,
        "backward_s": t2 - t1 if train else None,
        "total_s": t2 - t0,
        "cpu_s": c2 - c0,
        "loss": float(total.detach()),
        "batches": batches,
    }


def torch_gradients(roles, params):
    """Per role and parameter of ``roles``: (role, spec, gradient array) of
    the PyTorch tensors ``params`` (zeros where no gradient reached one)."""
    import numpy as np

    out = []
    for role, ps in zip(roles, params):
        for spec in role["params"]:
            g = ps[spec["name"]].grad
            g = np.zeros(spec["shape"], np.float32) if g is None else g.detach().cpu().numpy()
            out.append((role["role"], spec, g))
    return out


def open_peer(peer, export, threads, profiling=0, train=False, trace=None, fsm=None, device="cpu"):
    fw = framework_of(peer)
    if device != "cpu" and fw != "torch":
        raise ValueError(f"{peer} runs on the CPU only ({fw} from PyPI has no CUDA build): run it with --device cpu")
    if fw == "dynet":
        return DynetPeer(export, 1 if peer == "dynet-agenda" else 0, profiling, train)
    if peer == "dgl-pull":
        from .dgl_pull import DglPullPeer

        return DglPullPeer(export, threads, train)
    if fw == "dgl":
        from .dgl_peer import DglPeer

        return DglPeer(export, threads, train)
    if peer == "torch-levels":
        from .levels import LevelsPeer

        return LevelsPeer(export, threads, train, device)
    if peer in BATCHED:
        if trace is None:
            raise ValueError(f"{peer} needs --trace (the export's trace: its samples)")
        return TorchBatchedPeer(peer, export, trace, threads, train, fsm, device)
    return TorchPeer(export, threads, train, device)


def grad_check(p, export):
    """After one training step of ``p``: the largest per-tensor relative
    difference of its gradients from the export's, and where it is."""
    import numpy as np

    worst, where = 0.0, None
    for role, spec, got in p.gradients():
        want = export.grad(spec)
        got = np.asarray(got, dtype=np.float64).reshape(want.shape)
        norm = max(float(np.abs(want).max()) if want.size else 0.0, 1e-6)
        err = float(np.abs(got - want).max()) / norm if want.size else 0.0
        if err > worst or where is None:
            worst, where = err, f"{role}.{spec['name']}"
    return worst, where


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return None
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def measure(p, warmup, repeats, export=None):
    """``warmup`` untimed runs, then ``repeats`` timed ones; medians per field
    and every run's total and CPU seconds. Training with ``export``: the
    first (untimed) step's gradients are checked against the export's."""
    check = {}
    if getattr(p, "train", False) and export is not None:
        p.run_once()
        check["grad_rel_err"], check["grad_worst"] = grad_check(p, export)
        warmup = max(warmup - 1, 0)
    for _ in range(warmup):
        p.run_once()
    runs = []
    for _ in range(repeats):
        gc.collect()
        runs.append(p.run_once())
    out = {}
    for key in ("construction_s", "forward_s", "backward_s", "total_s", "cpu_s"):
        vals = [r[key] for r in runs if r[key] is not None]
        out[key] = median(vals) if vals else None
    out["samples"] = [r["total_s"] for r in runs]
    out["cpu_samples"] = [r["cpu_s"] for r in runs]
    out["loss"] = runs[-1]["loss"] if runs else None
    out["batches"] = runs[-1].get("batches") if runs else None
    out.update(check)
    return out
