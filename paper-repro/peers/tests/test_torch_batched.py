"""PyTorch batched by a schedule (torch-depth, torch-agenda, torch-fsm) and
by levels with fused gates (torch-levels; skipped, saying why, without
PyTorch, batchlab_torch or batchlab's binaries): same weights give
batchlab's reference loss and, training, its gradients within 1e-4 under
every schedule and by levels, and the learned FSM runs no more batches than
depth; the row-wise program text and torch-levels' fused cells need no
framework."""

import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

from batchlab_peers import codegen
from batchlab_peers.levels import FusedRole
from tests.synth import chain_parts

HAVE_TORCH = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("batchlab_torch") is not None


class RowsCodegenTest(unittest.TestCase):
    def test_row_wise_program_reads_rows_and_zeros_absent_inputs(self):
        header, _ = chain_parts()
        roles = header["roles"]
        src = "\n".join(codegen.role_source(r, i, "torch-rows") for i, r in enumerate(roles))
        self.assertIn("F.linear(", src)
        self.assertIn("row.shape[0]", src)  # an absent input is zeros, a row per node
        self.assertNotIn("addmv", src)


def gru_role(h=4):
    """A GRU cell as the built-in ``gru`` writes it: z and r read (x, h_prev),
    the candidate (x, r * h_prev)."""
    params = [{"name": n, "shape": [h]} for n in ("b_z", "b_r", "b_h")]
    params += [{"name": n, "shape": [h, h]} for n in ("W_z", "U_z", "W_r", "U_r", "W_h", "U_h")]
    v = {"shape": [h]}
    ops = [
        {"out": "z_pre", "op": "affine", "args": ["b_z", "W_z", "x", "U_z", "hp"], **v},
        {"out": "r_pre", "op": "affine", "args": ["b_r", "W_r", "x", "U_r", "hp"], **v},
        {"out": "z", "op": "sigmoid", "args": ["z_pre"], **v},
        {"out": "r", "op": "sigmoid", "args": ["r_pre"], **v},
        {"out": "rh", "op": "mul", "args": ["r", "hp"], **v},
        {"out": "hh_pre", "op": "affine", "args": ["b_h", "W_h", "x", "U_h", "rh"], **v},
        {"out": "hh", "op": "tanh", "args": ["hh_pre"], **v},
        {"out": "nz", "op": "one_minus", "args": ["z"], **v},
        {"out": "keep", "op": "mul", "args": ["nz", "hp"], **v},
        {"out": "upd", "op": "mul", "args": ["z", "hh"], **v},
        {"out": "h", "op": "add", "args": ["keep", "upd"], **v},
    ]
    ports = [
        {"name": "x", "arity": "one", "inputs": [{"name": "x", "shape": [h]}]},
        {"name": "prev", "arity": "optional", "inputs": [{"name": "hp", "shape": [h]}]},
    ]
    return {"role": "gru", "cell": "gru", "ports": ports, "params": params, "ops": ops, "outputs": ["h"]}


class LevelsPlanTest(unittest.TestCase):
    """torch-levels' fused gates, read from the generated source (no PyTorch needed)."""

    def test_gates_reading_the_same_inputs_are_one_product_per_input(self):
        fr = FusedRole(gru_role(), 0)
        # z and r read (x, h_prev): one gate group; the candidate (x, rh) another.
        self.assertEqual([g.vars for g in fr.groups], [("x", "hp"), ("x", "rh")])
        self.assertEqual(fr.stacks["x"].rows, 12)  # W_z, W_r, W_h one under another
        self.assertEqual([b for b, _, _ in fr.stacks["x"].biases], ["b_z", "b_r", "b_h"])
        self.assertEqual(fr.stacks["hp"].biases, [])  # x carries every bias
        src = fr.source(frozenset())
        self.assertEqual(src.count("F.linear("), 3, src)  # x, h_prev, rh: one product each
        self.assertIn("split_with_sizes([4, 4], 1)", src)
        self.assertIn("s_x[:, 8:12] + s_rh", src)  # the candidate's slice of x's product
        # Each export parameter is a slice of one stacked leaf.
        self.assertEqual(fr.sites()["W_r"], [("W:x", 4, 4)])
        self.assertEqual(fr.sites()["b_h"], [("b:x", 8, 4)])

    def test_an_absent_input_skips_its_product_and_reads_zeros_elsewhere(self):
        src = FusedRole(gru_role(), 0).source(frozenset({"hp"}))
        self.assertEqual(src.count("F.linear("), 2, src)  # x and rh; h_prev's is skipped
        self.assertIn("v_hp = torch.zeros((n, 4), device=device)", src)
        self.assertNotIn("fw_hp", src)

    def test_an_absent_bias_carrier_keeps_its_biases(self):
        src = FusedRole(gru_role(), 0).source(frozenset({"x"}))
        self.assertIn("fb_x[0:8]", src)  # z and r: their biases without x's product
        self.assertNotIn("F.linear(v_x", src)


@unittest.skipUnless(
    HAVE_TORCH, "PyTorch or batchlab_torch is not installed in this Python (paper-repro peers --install --peers torch)"
)
class TorchBatchedTest(unittest.TestCase):
    def exports(self):
        d = os.environ.get("BATCHLAB_TEST_EXPORTS")
        if not d:
            self.skipTest("BATCHLAB_TEST_EXPORTS not set (the Rust test paper-repro/tests/peers.rs sets it)")
        if not os.environ.get("BATCHLAB_ENGINE") or not os.environ.get("BATCHLAB_SEARCH"):
            self.skipTest("BATCHLAB_ENGINE and BATCHLAB_SEARCH not set (the Rust test sets them)")
        return sorted(glob.glob(os.path.join(d, "*.safetensors")))

    def harness(self, *args):
        with tempfile.TemporaryDirectory() as t:
            out = os.path.join(t, "r.json")
            done = subprocess.run(
                [sys.executable, "-m", "batchlab_peers", *args, "--result", out], capture_output=True, text=True
            )
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(out) as f:
                return json.load(f)

    def test_batched_peers_equal_the_reference(self):
        for f in self.exports():
            trace = f[: -len(".safetensors")] + ".json"
            with self.subTest(export=os.path.basename(f)):
                batches = {}
                for peer in ("torch-depth", "torch-agenda", "torch-fsm"):
                    fsm = ["--fsm-trace", trace, "--fsm-export", f, "--fsm-episodes", "100"]
                    # Training checks the loss and every gradient; inference
                    # (its own code path) once per workload.
                    for train in (["--train"], []) if peer == "torch-fsm" else (["--train"],):
                        r = self.harness(
                            "run", "--export", f, "--trace", trace, "--peer", peer, "--repeats", "1", *fsm, *train
                        )
                        self.assertLessEqual(r["loss_rel_err"], 1e-4, (peer, train))
                        if train:
                            self.assertLessEqual(r["grad_rel_err"], 1e-4, f"{peer}: {r['grad_worst']}")
                        batches[peer] = r["batches"]
                self.assertLessEqual(batches["torch-fsm"], batches["torch-depth"], batches)

    def test_torch_levels_equals_the_reference(self):
        for f in self.exports():
            with self.subTest(export=os.path.basename(f)):
                # No --trace: the levels come from the export's bindings alone.
                # Inference runs twice (warm-up and one timed run) on the same
                # buffers; training checks the loss and every gradient.
                for train in (["--train"], []):
                    r = self.harness("run", "--export", f, "--peer", "torch-levels", "--repeats", "1", *train)
                    self.assertEqual(r["peer"], "torch-levels")
                    self.assertLessEqual(r["loss_rel_err"], 1e-4, train)
                    if train:
                        self.assertLessEqual(r["grad_rel_err"], 1e-4, r["grad_worst"])
                    self.assertGreater(r["batches"], 0)

    def test_torch_levels_state_in_lists_or_buffers_gives_the_same_numbers(self):
        import numpy as np

        from batchlab_peers.export import Export
        from batchlab_peers.levels import LevelsPeer

        for f in self.exports():
            e = Export.read(f)
            for train in (True, False):
                with self.subTest(export=os.path.basename(f), train=train):
                    runs = {lists: LevelsPeer(e, 1, train=train, lists=lists) for lists in (True, False)}
                    losses = {lists: p.run_once()["loss"] for lists, p in runs.items()}
                    self.assertAlmostEqual(losses[True], losses[False], delta=1e-5 * abs(losses[False]))
                    if train:
                        for (_, spec, a), (_, _, b) in zip(runs[True].gradients(), runs[False].gradients()):
                            scale = max(float(np.abs(b).max()), 1e-6)
                            self.assertLessEqual(float(np.abs(a - b).max()) / scale, 1e-5, spec["name"])

    def test_torch_fsm_without_its_training_trace_is_an_error(self):
        f = self.exports()[0]
        with tempfile.TemporaryDirectory() as t:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "batchlab_peers",
                    "run",
                    "--export",
                    f,
                    "--trace",
                    f[: -len(".safetensors")] + ".json",
                    "--peer",
                    "torch-fsm",
                    "--result",
                    os.path.join(t, "r.json"),
                ],
                capture_output=True,
                text=True,
            )
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("--fsm-trace", done.stderr)

    def test_device_cuda_runs_pytorch_there_and_refuses_what_cannot(self):
        import torch

        f = self.exports()[0]
        trace = f[: -len(".safetensors")] + ".json"

        def run(peer, device):
            with tempfile.TemporaryDirectory() as t:
                return subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "batchlab_peers",
                        "run",
                        "--export",
                        f,
                        "--trace",
                        trace,
                        "--peer",
                        peer,
                        "--repeats",
                        "1",
                        "--device",
                        device,
                        "--result",
                        os.path.join(t, "r.json"),
                    ],
                    capture_output=True,
                    text=True,
                )

        # DyNet from PyPI has no CUDA build: refused by name, whatever the machine.
        done = run("dynet-none", "cuda")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("runs on the CPU only", done.stderr)
        if not torch.cuda.is_available():
            # No GPU: the PyTorch peers say so (exit 3: unavailable), never a CPU fall back.
            for peer in ("torch", "torch-depth", "torch-levels"):
                done = run(peer, "cuda")
                self.assertEqual(done.returncode, 3, done.stderr)
                self.assertIn("sees no CUDA device", done.stderr)
            return
        for peer in ("torch", "torch-depth", "torch-levels"):
            r = self.harness(
                "run", "--export", f, "--trace", trace, "--peer", peer, "--repeats", "1", "--device", "cuda", "--train"
            )
            self.assertEqual(r["device"], "cuda")
            self.assertLessEqual(r["loss_rel_err"], 1e-4, peer)
            self.assertLessEqual(r["grad_rel_err"], 1e-4, f"{peer}: {r['grad_worst']}")
