import unittest

from batchlab_peers.export import Export, ExportError
from tests.synth import chain_export, to_bytes


class ExportTest(unittest.TestCase):
    def test_round_trip_reads_header_and_parameters(self):
        e = chain_export()
        self.assertEqual(e.header["workload"], "synthetic-chain")
        spec = e.roles[0]["params"][0]
        values = e.param_list(spec)
        self.assertEqual(len(values), 20)
        self.assertAlmostEqual(values[0], 0.01, places=6)
        self.assertAlmostEqual(values[19], 0.2, places=6)

    def test_damaged_files_are_errors_naming_the_file(self):
        with self.assertRaisesRegex(ExportError, "x.blm: not a batchlab model export"):
            Export.from_bytes(b"hello world, not an export", "x.blm")
        good = to_bytes({"format": "batchlab-model-export", "version": 1}, [])
        with self.assertRaisesRegex(ExportError, "missing field 'workload'"):
            Export.from_bytes(good, "x.blm")
        e = chain_export()
        raw = to_bytes(e.header, [0.0] * (e.header["data_floats"] - 1))
        with self.assertRaisesRegex(ExportError, "data section"):
            Export.from_bytes(raw, "x.blm")
        wrong = dict(e.header, version=2)
        with self.assertRaisesRegex(ExportError, "version 2"):
            Export.from_bytes(to_bytes(wrong, []), "x.blm")

    def test_a_missing_file_is_an_error_naming_it(self):
        with self.assertRaisesRegex(ExportError, "/no/such.blm"):
            Export.read("/no/such.blm")


if __name__ == "__main__":
    unittest.main()
