"""The gated graph network of ``ggnn.py`` written the way PyTorch Geometric
users write it, on the per-graph model's own modules (the same weights): a
mini-batch of molecules collated into one big disconnected graph, each
propagation step one Linear call per bond type over all that type's edges,
one scatter-sum of all messages into their targets, one GRU call on all
nodes; the readout pooled per graph. The baseline that ``bt.run`` on
``ggnn.py`` is compared with (``setup``'s ``pyg``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_geometric.data import Batch, Data
from torch_geometric.nn import global_add_pool
from torch_geometric.utils import scatter

from .data import Molecule
from .ggnn import GGNN


def to_data(mol: Molecule) -> Data:
    """A molecule as PyG's ``Data``: atom types, the directed bonds and
    their types, the graph's label."""
    e = torch.tensor(mol.edges, dtype=torch.long).view(-1, 3)
    return Data(
        x=torch.tensor(mol.atoms, dtype=torch.long),
        edge_index=e[:, :2].t().contiguous(),
        edge_type=e[:, 2].contiguous(),
        y=torch.tensor([mol.label]),
        num_nodes=len(mol.atoms),
    )


class PygGGNN:
    """``PygGGNN(model)(molecules)`` returns the per-molecule losses that
    ``[model(m) for m in molecules]`` returns, computed on the whole
    mini-batch at once."""

    def __init__(self, model: GGNN) -> None:
        self.model = model
        # Each molecule's Data is built once, as a PyG dataset holds them;
        # the molecule is kept with it so that its id stays its own.
        self._data: dict[int, tuple[Molecule, Data]] = {}

    def data(self, mol: Molecule) -> Data:
        hit = self._data.get(id(mol))
        if hit is None:
            hit = self._data[id(mol)] = (mol, to_data(mol))
        return hit[1]

    def __call__(self, mols: list[Molecule]) -> list[torch.Tensor]:
        m = self.model
        b = Batch.from_data_list([self.data(mol) for mol in mols])  # edge_index offset per graph
        src, dst = b.edge_index
        # The edges grouped by bond type once per mini-batch, so that each
        # step runs one Linear per type and one scatter over every message.
        by_type = [(b.edge_type == t).nonzero().view(-1) for t in range(len(m.msg))]
        srcs = [src[e] for e in by_type]
        into = torch.cat([dst[e] for e in by_type])
        x = m.embed(b.x)
        h = x
        for _ in range(m.steps):
            msgs = torch.cat([lin(h[s]) for lin, s in zip(m.msg, srcs)])
            h = m.update(scatter(msgs, into, dim=0, dim_size=h.size(0), reduce="sum"), h)
        g = torch.tanh(global_add_pool(m.readout(h, x), b.batch, size=b.num_graphs))
        return list(F.cross_entropy(m.out(g), b.y, reduction="none").unbind())
