"""Against the real DyNet (skipped, saying why, when it is not installed):
same weights give batchlab's reference loss within 1e-4 and, training, its
reference gradients within 1e-4; DyNet's profiler counts the batches the
simulation predicts, and executes the generated ops."""

import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

from batchlab_peers import codegen
from batchlab_peers.export import Export

HAVE_DYNET = importlib.util.find_spec("dynet") is not None


@unittest.skipUnless(HAVE_DYNET, "DyNet is not installed in this Python (paper-repro peers --install)")
class DynetTest(unittest.TestCase):
    def exports(self):
        d = os.environ.get("BATCHLAB_TEST_EXPORTS")
        if not d:
            self.skipTest("BATCHLAB_TEST_EXPORTS not set (the Rust test paper-repro/tests/peers.rs sets it)")
        return sorted(glob.glob(os.path.join(d, "*.safetensors")))

    def harness(self, *args):
        # DyNet is configured once per process: every check in its own.
        with tempfile.TemporaryDirectory() as t:
            out = os.path.join(t, "r.json")
            subprocess.run(
                [sys.executable, "-m", "batchlab_peers", *args, "--result", out], check=True, capture_output=True
            )
            with open(out) as f:
                return json.load(f)

    def test_same_weights_same_loss_and_batches(self):
        for f in self.exports():
            e = Export.read(f)
            with self.subTest(export=os.path.basename(f)):
                c = self.harness("count", "--export", f)
                self.assertLessEqual(c["loss_rel_err"], 1e-4)
                self.assertEqual(c["dynet_batches"], c["attribution"]["dynet"])
                self.assertEqual(c["program_ops"], e.header["op_nodes"])
                self.assertEqual(c["dynet_nodes"], e.header["op_nodes"] + codegen.two_node_ops(e, "dynet"))
                for peer in ("dynet-none", "dynet-agenda"):
                    r = self.harness("run", "--export", f, "--peer", peer, "--repeats", "1")
                    self.assertLessEqual(r["loss_rel_err"], 1e-4, peer)

    def test_training_gradients_equal_the_reference(self):
        for f in self.exports():
            e = Export.read(f)
            if not e.has_gradients():
                self.skipTest(f"{f} has no gradients (engine export-model --gradients)")
            with self.subTest(export=os.path.basename(f)):
                for peer in ("dynet-none", "dynet-agenda"):
                    r = self.harness("run", "--export", f, "--peer", peer, "--repeats", "1", "--train")
                    self.assertLessEqual(r["loss_rel_err"], 1e-4, peer)
                    self.assertLessEqual(r["grad_rel_err"], 1e-4, f"{peer}: {r['grad_worst']}")
                    self.assertGreater(r["backward_s"], 0.0)


if __name__ == "__main__":
    unittest.main()
