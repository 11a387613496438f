"""The batch-count simulation: hand-made cases, and — when the Rust test
hands over exports of real traces (BATCHLAB_TEST_EXPORTS) — agreement with
batchlab's own agenda count."""

import glob
import os
import unittest

from batchlab_peers import codegen, explain
from batchlab_peers.export import Export
from tests.synth import chain_export


class ExplainTest(unittest.TestCase):
    def test_a_chain_is_one_batch_per_op_and_step(self):
        e = chain_export(n=3)
        counts = explain.attribution(e)
        # The lookups batch once; each step's affine, sigmoid, mul run alone
        # (a chain); then the port sum and the total.
        self.assertEqual(counts["dynet"], 1 + 3 * 3 + 1 + 1)
        self.assertEqual(len(set(counts.values())), 1)

    def test_one_minus_is_two_dynet_nodes(self):
        e = chain_export(n=3, extra_ops=("one_minus",))
        counts = explain.attribution(e)
        self.assertEqual(counts["dynet"] - counts["+one_minus"], 3)
        self.assertEqual(codegen.two_node_ops(e, "dynet"), 3)
        self.assertEqual(codegen.two_node_ops(e, "torch"), 0)

    def test_real_traces_reach_batchlabs_agenda_count(self):
        d = os.environ.get("BATCHLAB_TEST_EXPORTS")
        if not d:
            self.skipTest("BATCHLAB_TEST_EXPORTS not set (the Rust test paper-repro/tests/peers.rs sets it)")
        files = sorted(glob.glob(os.path.join(d, "*.safetensors")))
        self.assertTrue(files, d)
        for f in files:
            e = Export.read(f)
            with self.subTest(export=os.path.basename(f)):
                self.assertEqual(explain.simulate(e, "+ties"), e.header["agenda_batches"])
                self.assertEqual(codegen.program_ops(e), e.header["op_nodes"])


if __name__ == "__main__":
    unittest.main()
