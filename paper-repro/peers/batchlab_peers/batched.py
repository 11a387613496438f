"""PyTorch batched by a schedule: the peers ``torch-depth``, ``torch-agenda``
and ``torch-fsm``.

The export's cells become row-wise PyTorch modules (``codegen``'s
``torch-rows`` backend: ``F.linear``, ``dim=1``), one per role, and the
trace becomes a plain PyTorch model that runs one sample node by node, as a
practitioner writes it. ``batchlab_torch.Runner`` then runs the mini-batch
by the schedule: ``depth`` (what DGL's ``prop_nodes_topo`` and TF Fold do),
``agenda`` (DyNet's) or the FSM policy ``search train`` learned for the
trace, each batch one call of the role's module on the gathered rows. The
three peers share everything but the schedule, so their difference is the
policy's effect inside PyTorch.

Timed per mini-batch, as for the other peers: the schedule (batchlab's
``engine schedule --serve``, a round trip per mini-batch), the gathers, the
cell calls and the writes, and with training the backward. Each sample's
graph (which nodes, bound to which producers) is given, as it is to the
eager peer: ``Runner`` finds it on the warm-up and keeps it.
"""

import json

from .program import Program


class ModelFromExport:
    """The export as a PyTorch model (``model``, its ``cells`` by role name)
    and the trace's samples: ``model(sample)`` runs one sample's nodes in id
    order and returns the sum of its losses."""

    def __init__(self, export, trace_path, train):
        import torch
        from torch import nn

        self.export = export
        program = Program(export, "torch-rows")
        makers = program.factories({"torch": torch, "F": torch.nn.functional})
        with open(trace_path) as f:
            nodes = json.load(f)["nodes"]
        if len(nodes) != len(export.nodes):
            raise ValueError(f"{trace_path}: {len(nodes)} nodes, the export {len(export.nodes)}")

        class Role(nn.Module):
            """One role's cell; its parameters under their cell names."""

            def __init__(self, make, params):
                super().__init__()
                self.names = list(params)
                for i, t in enumerate(params.values()):
                    self.register_parameter(f"p{i}", nn.Parameter(t, requires_grad=train))
                self.make = make

            def forward(self, *args):
                return self.make({n: getattr(self, f"p{i}") for i, n in enumerate(self.names)})(*args)

        loss_inputs = set()
        for v in export.header["loss_nodes"]:
            for producers in export.nodes[v]["ports"]:
                loss_inputs.update(producers)
        self.loss_roles = {export.nodes[v]["role"] for v in export.header["loss_nodes"]}
        roles = [
            Role(make, {p["name"]: torch.from_numpy(export.param(p)).contiguous() for p in r["params"]})
            for make, r in zip(makers, export.roles)
        ]
        plans = program.plans
        by_instance = {}
        for i, n in enumerate(nodes):
            inst = n.get("instance")
            if inst is None:
                if plans[i][0] not in self.loss_roles:
                    raise ValueError(f"{trace_path}: node {i} belongs to no sample and is not the loss")
                continue
            by_instance.setdefault(inst, []).append(i)
        self.samples = [tuple(by_instance[k]) for k in sorted(by_instance)]
        tensor, stack = torch.tensor, torch.stack

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.roles = nn.ModuleList(roles)

            def forward(self, sample):
                outs = {}
                losses = []
                for i in sample:
                    r, ins, row, label = plans[i]
                    args = []
                    for kind, producers, j, _ in ins:
                        if kind == 1:
                            args.append(outs[producers[0]][j])
                        elif kind == 2:
                            args.append(stack([outs[u][j] for u in producers]).sum(0))
                        else:
                            args.append(None)
                    outs[i] = self.roles[r](*args, tensor([row]), tensor([label]))
                    if i in loss_inputs:
                        losses.append(outs[i][0])
                return stack(losses).sum(0)

        self.model = Model()
        self.cells = {export.roles[r]["role"]: m for r, m in enumerate(self.model.roles)}
        self.params = [
            {p["name"]: getattr(m, f"p{i}") for i, p in enumerate(r["params"])}
            for m, r in zip(self.model.roles, export.roles)
        ]
