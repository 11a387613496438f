"""The DGL peers, ``dgl`` (after DGL's Tree-LSTM example) and ``dgl-pull``
(the first one, a pull per role and frontier), skipped, saying why, where
DGL is not installed (it has an environment of its own, `paper-repro peers
--install --peers dgl`): same weights give batchlab's reference loss and,
training, its gradients within 1e-4 on the six workloads, training and
inference on every export, and once per peer through the command line. A
workload a peer has no DGL form for is skipped with the peer's reason (its
`PeerUnavailable`; exit status 3 on the command line)."""

import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

from batchlab_peers import peers
from batchlab_peers.export import Export

HAVE_DGL = importlib.util.find_spec("dgl") is not None and importlib.util.find_spec("torch") is not None


@unittest.skipUnless(HAVE_DGL, "DGL is not installed in this Python (paper-repro peers --install --peers dgl)")
class DglTest(unittest.TestCase):
    def exports(self):
        d = os.environ.get("BATCHLAB_TEST_EXPORTS")
        if not d:
            self.skipTest("BATCHLAB_TEST_EXPORTS not set (the Rust test paper-repro/tests/peers.rs sets it)")
        return sorted(glob.glob(os.path.join(d, "*.safetensors")))

    def harness(self, *args):
        """The command line, in a process of its own."""
        with tempfile.TemporaryDirectory() as t:
            out = os.path.join(t, "r.json")
            done = subprocess.run(
                [sys.executable, "-W", "ignore", "-m", "batchlab_peers", *args, "--result", out],
                capture_output=True,
                text=True,
            )
            if done.returncode == 3:
                self.skipTest(done.stderr.strip())
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(out) as f:
                return json.load(f)

    def equals_the_reference(self, peer):
        # In this process (DGL imports once); the command line once per peer.
        for i, f in enumerate(self.exports()):
            e = Export.read(f)
            for train in (True, False):
                with self.subTest(peer=peer, export=os.path.basename(f), train=train):
                    try:
                        p = peers.open_peer(peer, e, 1, train=train)
                    except peers.PeerUnavailable as why:
                        self.skipTest(f"{peer} on {e.header['workload']}: {why}")
                    self.assertEqual(p.name, peer)
                    m = peers.measure(p, 0, 1, e if train else None)
                    ref = e.header["reference_loss"]
                    self.assertLessEqual(abs(m["loss"] - ref) / abs(ref), 1e-4)
                    if train:
                        self.assertLessEqual(m["grad_rel_err"], 1e-4, m["grad_worst"])
            if i == 0:
                r = self.harness("run", "--export", f, "--peer", peer, "--repeats", "1", "--train")
                self.assertEqual(r["peer"], peer)
                self.assertLessEqual(r["loss_rel_err"], 1e-4)
                self.assertLessEqual(r["grad_rel_err"], 1e-4, r["grad_worst"])

    def test_dgl_equals_the_reference(self):
        self.equals_the_reference("dgl")

    def test_dgl_pull_equals_the_reference(self):
        self.equals_the_reference("dgl-pull")
