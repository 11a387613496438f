import glob
import importlib.util
import json
import os
import struct
import unittest

from batchlab_peers.export import Export, ExportError
from tests.synth import chain_export, chain_parts, safetensors_bytes, split, to_bytes

HAVE_NUMPY = importlib.util.find_spec("numpy") is not None


def edited(raw, edit):
    """``raw`` with its safetensors header table edited in place by ``edit``."""
    table, data = split(raw)
    edit(table)
    return safetensors_bytes(table, data)


def edited_header(raw, edit):
    """``raw`` with the export header (the ``batchlab`` metadata) edited."""

    def go(table):
        h = json.loads(table["__metadata__"]["batchlab"])
        edit(h)
        table["__metadata__"]["batchlab"] = json.dumps(h)

    return edited(raw, go)


class ExportTest(unittest.TestCase):
    def refused(self, raw, message):
        with self.assertRaisesRegex(ExportError, "^x.safetensors: .*" + message):
            Export.from_bytes(raw, "x.safetensors")

    def test_round_trip_reads_header_and_parameters(self):
        e = chain_export()
        self.assertEqual(e.header["workload"], "synthetic-chain")
        spec = e.roles[0]["params"][0]
        values = e.param_list(spec)
        self.assertEqual(len(values), 20)
        self.assertAlmostEqual(values[0], 0.01, places=6)
        self.assertAlmostEqual(values[19], 0.2, places=6)
        self.assertFalse(e.has_gradients())
        self.assertEqual(e.data_floats, 20 + 2 + 4 + 4)
        with self.assertRaisesRegex(ExportError, "synthetic.safetensors: parameter 'E' has no gradient"):
            e.grad(spec)
        with self.assertRaisesRegex(ExportError, "not an entry of this export's `roles`"):
            e.param_list(dict(spec))

    @unittest.skipUnless(HAVE_NUMPY, "numpy is not installed in this Python")
    def test_parameters_and_gradients_are_numpy_arrays_of_their_shape(self):
        e = chain_export(gradients=True)
        self.assertTrue(e.has_gradients())
        self.assertEqual(e.data_floats, 2 * (20 + 2 + 4 + 4))
        w = e.roles[1]["params"][1]
        self.assertEqual(e.param(w).shape, (2, 2))
        self.assertEqual(e.param(w).dtype.name, "float32")
        self.assertAlmostEqual(float(e.param(w)[1, 1]), 0.04, places=6)
        self.assertAlmostEqual(float(e.grad(w)[1, 0]), -1.5, places=6)

    def test_not_an_export_is_refused(self):
        self.refused(b"hello", "too short for the header length")
        self.refused(b"hello world, not an export", "header length .* runs past the end of the file")
        self.refused(safetensors_bytes({}, b"")[:8] + b"{nope" + b" " * 3, "safetensors header:")
        self.refused(
            safetensors_bytes({"a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}, b"\0" * 4),
            "without `batchlab` metadata",
        )
        raw = to_bytes(*chain_parts())
        self.refused(edited(raw, lambda t: t["__metadata__"].update(batchlab="{")), "metadata `batchlab`:")

    def test_a_bad_header_length_is_refused(self):
        raw = to_bytes(*chain_parts())
        (n,) = struct.unpack("<Q", raw[:8])
        self.refused(struct.pack("<Q", len(raw)) + raw[8:], "header length .* runs past the end")
        self.refused(struct.pack("<Q", n // 2) + raw[8:], "safetensors header:")
        self.refused(raw[: 8 + n // 2], "header length .* runs past the end")

    def test_truncated_data_is_refused(self):
        raw = to_bytes(*chain_parts())
        self.refused(raw[:-4], r"data_offsets \[\d+, \d+\] lie outside the \d+-byte data section")

    def test_tensor_offsets_outside_the_data_are_refused(self):
        raw = to_bytes(*chain_parts())

        def past(t):
            t["param/step/b"]["data_offsets"][1] += 10_000

        self.refused(edited(raw, past), r"tensor `param/step/b`: data_offsets \[\d+, \d+\] lie outside")

        def wrong_size(t):
            t["param/step/b"]["data_offsets"][1] -= 4

        self.refused(edited(raw, wrong_size), "`param/step/b`: 4 bytes of data, but shape \\[2\\] of F32 is 8")

        def overlap(t):
            t["param/step/b"]["data_offsets"] = [0, 8]

        self.refused(edited(raw, overlap), "tensors overlap or leave a gap")
        table, data = split(raw)
        self.refused(safetensors_bytes(table, data + b"\0" * 4), "data section has .* its tensors cover")

        def f16(t):
            t["param/step/b"]["dtype"] = "F16"

        self.refused(edited(raw, f16), "tensor `param/step/b` is F16; batchlab reads F32 tensors")

    def test_tensors_must_match_the_header(self):
        header, tensors = chain_parts(gradients=True)

        def without(name):
            return to_bytes(header, {k: v for k, v in tensors.items() if k != name})

        self.refused(without("param/step/W"), r"no tensor `param/step/W` \(role step parameter W\)")
        self.refused(without("grad/step/W"), "no tensor `grad/step/W` .*other parameters' gradients")
        reshaped = dict(tensors, **{"param/step/W": ([4], tensors["param/step/W"][1])})
        self.refused(
            to_bytes(header, reshaped),
            r"tensor `param/step/W` has shape \[4\], but role step parameter W needs \[2, 2\]",
        )
        extra = dict(tensors, **{"param/nobody/x": ([1], [0.0])})
        self.refused(to_bytes(header, extra), "tensor `param/nobody/x` is no parameter")

    def test_other_versions_and_headers_are_refused(self):
        raw = to_bytes(*chain_parts())
        self.refused(
            edited_header(raw, lambda h: h.update(version=1)), "version 1 is not 'batchlab-model-export' version 2"
        )
        self.refused(edited_header(raw, lambda h: h.update(version=3)), "version 3")
        self.refused(edited_header(raw, lambda h: h.update(format="x")), "format 'x'")
        self.refused(b"BLMODEL\0" + raw[8:], "a version 1 model export; .* write it again")
        self.refused(edited_header(raw, lambda h: h.pop("workload")), "missing field 'workload'")
        self.refused(
            edited_header(raw, lambda h: h.update(roles=[{"role": "r", "params": [7]}])),
            r"roles\[0\].params\[0\] is not a `name` and a `shape`",
        )
        self.refused(edited_header(raw, lambda h: h.update(roles={})), "`roles` is not a list")

    def test_bad_role_index_or_ports_past_the_nodes_are_refused(self):
        # Regression (bad input round two): a bad role index gave a traceback,
        # and ports pointing past the node list generated a program.
        raw = to_bytes(*chain_parts())

        def node(i, **kw):
            def edit(h):
                h["nodes"][i].update(kw)

            return edit

        self.refused(edited_header(raw, node(1, role=99)), r"nodes\[1\]: role 99 is not an index of `roles`")
        self.refused(edited_header(raw, node(1, role=-1)), r"nodes\[1\]: role -1")
        self.refused(edited_header(raw, node(0, ports=[[5]])), r"nodes\[0\]: .*not .*producer lists|earlier nodes")
        self.refused(edited_header(raw, node(1, row="x")), r"nodes\[1\]: `row` is not an integer")
        self.refused(edited_header(raw, lambda h: h.update(loss_nodes=[999])), "loss node 999 is not a node")

    def test_a_missing_file_is_an_error_naming_it(self):
        with self.assertRaisesRegex(ExportError, "/no/such.safetensors"):
            Export.read("/no/such.safetensors")

    def test_real_exports_read(self):
        d = os.environ.get("BATCHLAB_TEST_EXPORTS")
        if not d:
            self.skipTest("BATCHLAB_TEST_EXPORTS not set (the Rust test paper-repro/tests/peers.rs sets it)")
        files = sorted(glob.glob(os.path.join(d, "*.safetensors")))
        self.assertTrue(files, d)
        for f in files:
            e = Export.read(f)
            with self.subTest(export=os.path.basename(f)):
                self.assertTrue(e.has_gradients())
                for r in e.roles:
                    for p in r["params"]:
                        n = 1
                        for s in p["shape"]:
                            n *= s
                        self.assertEqual(len(e.param_list(p)), n)
                with open(f, "rb") as fh:
                    raw = fh.read()
                with self.assertRaisesRegex(ExportError, "^cut: "):
                    Export.from_bytes(raw[: len(raw) // 2], "cut")


if __name__ == "__main__":
    unittest.main()
