import unittest

from batchlab_peers import profile

SAMPLE = """[dynet] noise
Forward Call
BatchSize:1 parameters({4,4}) @ 0x55d0
BatchSize:1 const_parameters({4}) @ 0x55d1
BatchSize:1 constant({4},0)
BatchSize:3 lookup_parameters(|x|=10 --> {4}) @ 0x55d2
BatchSize:3 a + a * a + a * a
BatchSize:3 \\sigma(a)
BatchSize:2 a + a
BatchSize:1 a + a + a
BatchSize:1 -a
BatchSize:1 1 + a
BatchSize:2 average(a, a)
BatchSize:3 pickneglogsoftmax(a)_{1}
Timing Info:
   0.1 FWD a
"""


class ProfileTest(unittest.TestCase):
    def test_leaves_are_set_apart_and_kinds_named(self):
        c = profile.parse(SAMPLE)
        self.assertEqual(c["forward_calls"], 1)
        self.assertEqual(c["parameters"], 2)
        self.assertEqual(c["constants"], 1)
        self.assertEqual(c["batches"], 9)
        self.assertEqual(c["nodes"], 3 + 3 + 3 + 2 + 1 + 1 + 1 + 2 + 3)
        self.assertEqual(c["by_kind"]["affine"], 1)
        self.assertEqual(c["by_kind"]["add|sum2"], 1)
        self.assertEqual(c["by_kind"]["sum3"], 1)
        self.assertEqual(c["by_kind"]["one_minus:negate"], 1)
        self.assertEqual(c["by_kind"]["mean"], 1)


if __name__ == "__main__":
    unittest.main()
