"""PyTorch batched by a schedule (torch-depth, torch-agenda, torch-fsm;
skipped, saying why, without PyTorch, batchlab_torch or batchlab's
binaries): same weights give batchlab's reference loss and, training, its
gradients within 1e-4 under every schedule, and the learned FSM runs no more
batches than depth; the row-wise program text needs no framework."""

import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

from batchlab_peers import codegen
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
            for peer in ("torch", "torch-depth"):
                done = run(peer, "cuda")
                self.assertEqual(done.returncode, 3, done.stderr)
                self.assertIn("sees no CUDA device", done.stderr)
            return
        for peer in ("torch", "torch-depth"):
            r = self.harness(
                "run", "--export", f, "--trace", trace, "--peer", peer, "--repeats", "1", "--device", "cuda", "--train"
            )
            self.assertEqual(r["device"], "cuda")
            self.assertLessEqual(r["loss_rel_err"], 1e-4, peer)
            self.assertLessEqual(r["grad_rel_err"], 1e-4, f"{peer}: {r['grad_worst']}")
