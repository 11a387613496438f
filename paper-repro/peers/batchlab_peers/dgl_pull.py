"""The first DGL peer (``dgl-pull``), kept to be timed beside ``dgl``
(:mod:`batchlab_peers.dgl_peer`): every trace node in one DGL graph, a
``g.pull`` per role and frontier, in DGL's own environment.

The export's nodes are the graph's nodes and its bindings the edges
(producer to consumer, the edge's ``port`` the consumer's port). Each node
keeps its outputs in ``ndata["out"]`` (``[nodes, outputs, width]``, zero
padded). DGL's topological frontiers (``dgl.topological_nodes_generator``,
what ``dgl.prop_nodes_topo`` walks) give the batches, level by level; in
each frontier, the nodes of one role are one ``g.pull`` (the messages copy
the producers' outputs; the reduce function places each message at its port,
summing a ``many`` port's, and calls the role's row-wise cell from
``codegen``'s ``torch-rows`` backend, the cells the batched PyTorch peers
run) or, for a role with no ports (an embedding lookup), one
``g.apply_nodes``. The loss is the sum of the loss cells' outputs.

Timed per mini-batch: building the graph from the bindings (``dgl.graph``,
the frontiers), the propagation, and when training the backward.

What it does differently from DGL's own Tree-LSTM example, and ``dgl``
does as the example does: a cell's gates are separate ``F.linear`` calls
(``codegen``'s row-wise cells) where the example fuses them; the lookup and
loss nodes are graph nodes, so there are more frontiers and a ``g.pull`` per
role in each; the reduce function pads every port, places the messages with
``index_put`` and asks per port whether any row has it; one zero-padded
``[nodes, outputs, width]`` frame holds every node's outputs, which DGL
copies out of place on every pull; and the graph is built inside the timed
region, where the example builds it in its data loader's collate function.
"""

from importlib import metadata

from .peers import PeerUnavailable, timed_step, torch_gradients, torch_params
from .program import Program


class DglPullPeer:
    """DGL message passing, a pull per role and frontier (see the module docs)."""

    framework = "dgl"

    def __init__(self, export, threads, train=False):
        try:
            import dgl
            import torch
        except Exception as e:
            raise PeerUnavailable(f"{type(e).__name__}: {e}") from None
        self.dgl, self.torch = dgl, torch
        torch.set_num_threads(threads)
        self.train = train
        self.name = "dgl-pull"
        self.version = f"{metadata.version('dgl')} (torch {torch.__version__})"
        self.export = export
        self.program = Program(export, "torch-rows")
        makers = self.program.factories({"torch": torch, "F": torch.nn.functional})
        self.params = torch_params(torch, export, train)
        self.fns = [make(ps) for make, ps in zip(makers, self.params)]
        loss_nodes = set(export.header["loss_nodes"])
        self.keep = [i for i in range(len(export.nodes)) if i not in loss_nodes]
        self.loss_inputs = sorted({u for v in loss_nodes for ps in export.nodes[v]["ports"] for u in ps})
        # Per role: its inputs as (port, output j of the producer, per-instance shape).
        self.inputs = []
        for r in export.roles:
            self.inputs.append(
                [
                    (p, j, tuple(inp["shape"]))
                    for p, port in enumerate(r["ports"])
                    for j, inp in enumerate(port["inputs"])
                ]
            )
        shapes = [tuple(o["shape"]) for r in export.roles for o in r["ops"] if o["out"] in r["outputs"]]
        self.width = max([_numel(s) for s in shapes] + [1])
        self.n_out = max([len(r["outputs"]) for r in export.roles] + [1])
        self.out_shapes = [
            [next(tuple(o["shape"]) for o in r["ops"] if o["out"] == name) for name in r["outputs"]]
            for r in export.roles
        ]

    def _graph(self):
        """The mini-batch's DGL graph and its frontiers by role."""
        torch, dgl = self.torch, self.dgl
        nodes = self.export.nodes
        local = {v: i for i, v in enumerate(self.keep)}
        src, dst, port = [], [], []
        for v in self.keep:
            for p, producers in enumerate(nodes[v]["ports"]):
                for u in producers:
                    src.append(local[u])
                    dst.append(local[v])
                    port.append(p)
        g = dgl.graph(
            (torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)), num_nodes=len(self.keep)
        )
        g.edata["port"] = torch.tensor(port, dtype=torch.int64)
        g.ndata["row"] = torch.tensor([nodes[v]["row"] for v in self.keep], dtype=torch.int64)
        g.ndata["label"] = torch.tensor([nodes[v]["label"] for v in self.keep], dtype=torch.int64)
        role = torch.tensor([nodes[v]["role"] for v in self.keep], dtype=torch.int64)
        steps = []
        for frontier in dgl.topological_nodes_generator(g):
            roles = role[frontier]
            for r in torch.unique(roles).tolist():
                steps.append((r, frontier[roles == r]))
        return g, steps

    def _cell(self, r, args, row, label):
        """Role ``r``'s cell on a batch; its outputs flattened and padded to
        ``[rows, outputs, width]``."""
        torch = self.torch
        outs = self.fns[r](*args, row, label)
        b = row.shape[0]
        flat = [o.reshape(b, -1) for o in outs]
        flat = [torch.nn.functional.pad(o, (0, self.width - o.shape[1])) for o in flat]
        flat += [flat[0].new_zeros(b, self.width)] * (self.n_out - len(flat))
        return torch.stack(flat, 1)

    def _propagate(self):
        torch = self.torch
        g, steps = self._graph()
        self.pulls = len(steps)
        g.ndata["out"] = torch.zeros(g.num_nodes(), self.n_out, self.width)

        def message(edges):
            return {"m": edges.src["out"], "p": edges.data["port"]}

        for r, vs in steps:
            ins = self.inputs[r]
            n_ports = len(self.export.roles[r]["ports"])
            if n_ports == 0:
                g.apply_nodes(lambda nodes, r=r: {"out": self._cell(r, [], nodes.data["row"], nodes.data["label"])}, vs)
                continue

            def reduce(nodes, r=r, ins=ins, n_ports=n_ports):
                m, p = nodes.mailbox["m"], nodes.mailbox["p"]
                b = m.shape[0]
                # Each message at its port; a `many` port's messages summed.
                at = torch.zeros(b, n_ports, self.n_out, self.width, dtype=m.dtype)
                at = at.index_put((torch.arange(b).unsqueeze(1).expand_as(p), p), m, accumulate=True)
                present = torch.zeros(b, n_ports, dtype=torch.bool)
                present[torch.arange(b).unsqueeze(1).expand_as(p), p] = True
                # A port no row has is None (the cell's zeros); one some rows
                # lack reads the zeros `at` holds there.
                args = [
                    at[:, port, j, : _numel(shape)].reshape((b, *shape)) if bool(present[:, port].any()) else None
                    for port, j, shape in ins
                ]
                return {"out": self._cell(r, args, nodes.data["row"], nodes.data["label"])}

            g.pull(vs, message, reduce)
        local = {v: i for i, v in enumerate(self.keep)}
        idx = torch.tensor([local[v] for v in self.loss_inputs], dtype=torch.int64)
        return g.ndata["out"][idx, 0, 0].sum()

    def run_once(self):
        # Inference under no_grad, as this peer always ran it; its pulls
        # (g.pull and g.apply_nodes calls) are counted by the run itself.
        r = timed_step(self.torch, self._propagate, self.train, self.params, None, inference=self.torch.no_grad())
        r["batches"] = self.pulls
        return r

    def gradients(self):
        """Per role and parameter: (spec, gradient array) of the last step."""
        return torch_gradients(self.export.roles, self.params)


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n
