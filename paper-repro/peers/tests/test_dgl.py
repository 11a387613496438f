"""The DGL peer (skipped, saying why, where DGL is not installed: it has
an environment of its own, `paper-repro peers --install --peers dgl`): same
weights give batchlab's reference loss and, training, its gradients within
1e-4 on the six workloads."""

import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

HAVE_DGL = importlib.util.find_spec("dgl") is not None and importlib.util.find_spec("torch") is not None


@unittest.skipUnless(HAVE_DGL, "DGL is not installed in this Python (paper-repro peers --install --peers dgl)")
class DglTest(unittest.TestCase):
    def exports(self):
        d = os.environ.get("BATCHLAB_TEST_EXPORTS")
        if not d:
            self.skipTest("BATCHLAB_TEST_EXPORTS not set (the Rust test paper-repro/tests/peers.rs sets it)")
        return sorted(glob.glob(os.path.join(d, "*.safetensors")))

    def harness(self, *args):
        with tempfile.TemporaryDirectory() as t:
            out = os.path.join(t, "r.json")
            done = subprocess.run(
                [sys.executable, "-W", "ignore", "-m", "batchlab_peers", *args, "--result", out],
                capture_output=True,
                text=True,
            )
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(out) as f:
                return json.load(f)

    def test_dgl_equals_the_reference(self):
        for i, f in enumerate(self.exports()):
            with self.subTest(export=os.path.basename(f)):
                r = self.harness("run", "--export", f, "--peer", "dgl", "--repeats", "1", "--train")
                self.assertLessEqual(r["loss_rel_err"], 1e-4)
                self.assertLessEqual(r["grad_rel_err"], 1e-4, r["grad_worst"])
                if i == 0:  # inference, its own code path, once
                    r = self.harness("run", "--export", f, "--peer", "dgl", "--repeats", "1")
                    self.assertLessEqual(r["loss_rel_err"], 1e-4)
