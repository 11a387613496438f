"""Running an export's trace with generated role functions, node by node.

Node ids are topological (producers come first), so one pass in id order
is a valid schedule: the way a user of an eager or define-by-run framework
walks a tree or a lattice. Per node, each port input is its producer's
output (one producer), the framework's sum of them (a ``many`` port with
several), or zeros (none) — the binding the export spells out.
"""

from . import codegen


class Program:
    """An export compiled for one backend: ``build(ctx)`` runs it."""

    def __init__(self, export, backend):
        self.export = export
        self.backend = backend
        self.source = codegen.program_source(export, backend, imports=False)
        self.ops = codegen.program_ops(export)
        # Per node: role index, then per port input (kind, producers, j, shape)
        # with kind 0 = zeros, 1 = one producer, 2 = summed producers.
        plans = []
        for n in export.nodes:
            role = export.roles[n["role"]]
            ins = []
            for port, producers in zip(role["ports"], n["ports"]):
                for j, inp in enumerate(port["inputs"]):
                    kind = min(len(producers), 2)
                    ins.append((kind, tuple(producers), j, tuple(inp["shape"])))
            plans.append((n["role"], ins, n["row"], n["label"]))
        self.plans = plans
        self.loss_nodes = list(export.header["loss_nodes"])

    def factories(self, namespace):
        """Executes the generated source in ``namespace``; the role factories."""
        code = compile(self.source, f"<batchlab_peers {self.backend}>", "exec")
        exec(code, namespace)
        return [namespace[f"make_role_{i}"] for i in range(len(self.export.roles))]

    def build(self, fns, zeros, add_all):
        """Runs every node; returns the loss nodes' first outputs.

        ``fns[r]`` is role r's function, ``zeros(shape)`` a zero value and
        ``add_all(values)`` the framework's sum of a list of values.
        """
        outs = [None] * len(self.plans)
        for i, (r, ins, row, label) in enumerate(self.plans):
            args = []
            for kind, producers, j, shape in ins:
                if kind == 1:
                    args.append(outs[producers[0]][j])
                elif kind == 2:
                    args.append(add_all([outs[u][j] for u in producers]))
                else:
                    args.append(zeros(shape))
            outs[i] = fns[r](*args, row, label)
        return [outs[v][0] for v in self.loss_nodes]
