import unittest

from batchlab_peers import codegen
from batchlab_peers.program import Program
from tests.synth import chain_export


class CodegenTest(unittest.TestCase):
    def test_one_statement_per_cell_op(self):
        e = chain_export(extra_ops=("tanh",))
        src = codegen.role_source(e.roles[1], 1, "dynet")
        body = [line.strip() for line in src.splitlines() if line.startswith("        v_")]
        self.assertEqual(
            body,
            [
                "v_pre = dy.affine_transform([p_b, p_W, v_x, p_U, v_hp])",
                "v_s = dy.logistic(v_pre)",
                "v_t0 = dy.tanh(v_s)",
                "v_out = dy.cmult(v_t0, v_hp)",
            ],
        )
        torch_src = codegen.role_source(e.roles[1], 1, "torch")
        self.assertIn("v_pre = torch.addmv(torch.addmv(p_b, p_W, v_x), p_U, v_hp)", torch_src)
        self.assertIn("def run(v_x, v_hp, row, label):", torch_src)

    def test_lookup_and_loss_use_the_node_data_modulo_the_sizes(self):
        e = chain_export()
        self.assertIn("dy.lookup(p_E, row % 10)", codegen.role_source(e.roles[0], 0, "dynet"))
        loss = {
            "role": "l",
            "cell": "l",
            "ports": [{"name": "x", "arity": "one", "inputs": [{"name": "m", "shape": [5]}]}],
            "params": [],
            "ops": [{"out": "loss", "op": "pick_loss", "args": ["m"], "shape": [1]}],
            "outputs": ["loss"],
        }
        self.assertIn("dy.pickneglogsoftmax(v_m, label % 5)", codegen.role_source(loss, 0, "dynet"))
        self.assertIn("label % 5:label % 5 + 1", codegen.role_source(loss, 0, "torch"))

    def test_program_ops_count_cell_ops_and_many_port_sums(self):
        e = chain_export(n=3)
        # 3 lookups + 3 steps of 3 ops + one port sum + the total's sum.
        self.assertEqual(codegen.program_ops(e), 3 + 9 + 1 + 1)
        self.assertEqual(codegen.program_ops(e), e.header["op_nodes"])

    def test_generated_program_runs_with_any_framework_stand_in(self):
        # A framework of Python floats: checks the driver's binding, not a peer.
        e = chain_export(n=2)
        p = Program(e, "dynet")
        calls = []

        class Dy:
            def lookup(self, table, i):
                calls.append(("lookup", i))
                return float(i)

            def affine_transform(self, a):
                return a[0] + a[2] + a[4]

            def logistic(self, x):
                return x

            def cmult(self, a, b):
                # A sum, not a product: with the absent `prev` as 0 a product
                # would make every step 0 whatever the binding.
                return a + b

            def esum(self, xs):
                calls.append(("esum", len(xs)))
                return sum(xs)

        makers = p.factories({"dy": Dy()})
        fns = [m({"E": None, "b": 1.0, "W": None, "U": None}) for m in makers]
        out = p.build(fns, lambda shape: 0.0, Dy().esum)
        # affine = b + x + hp, cmult = s + hp: step0 reads lookup 0 and no
        # prev: s = 1 + 0 + 0, out = 1; step1 reads lookup 3 and step0:
        # s = 1 + 3 + 1, out = 6; the total sums both: 7. A wrong binding
        # (a port, a row, the optional prev) gives another number.
        self.assertEqual(out, [7.0])
        self.assertIn(("lookup", 3), calls)
        self.assertIn(("esum", 2), calls)

    def test_bad_cells_are_errors_naming_role_and_op(self):
        e = chain_export()
        bad = dict(e.roles[1], ops=[{"out": "y", "op": "conv", "args": ["x"], "shape": [2]}])
        with self.assertRaisesRegex(codegen.CodegenError, "role step .*op 'y': unknown op 'conv'"):
            codegen.role_source(bad, 1, "dynet")
        bad = dict(e.roles[1], ops=[{"out": "y", "op": "tanh", "args": ["nope"], "shape": [2]}])
        with self.assertRaisesRegex(codegen.CodegenError, "undefined operand 'nope'"):
            codegen.role_source(bad, 1, "dynet")
        with self.assertRaisesRegex(codegen.CodegenError, "unknown backend 'tf'"):
            codegen.role_source(e.roles[1], 1, "tf")


if __name__ == "__main__":
    unittest.main()
