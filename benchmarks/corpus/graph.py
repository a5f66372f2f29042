"""Graph neural networks with message passing written in plain torch (index_add_ over an edge
index): GraphSAGE node classification, GIN graph classification, link prediction."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import _data, buggy, healthy

torch.set_num_threads(1)


class SAGELayer(nn.Module):
    """h_i' = W_self h_i + W_neigh mean_{j in N(i)} h_j."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.self_lin = nn.Linear(d_in, d_out)
        self.neigh_lin = nn.Linear(d_in, d_out, bias=False)

    def forward(self, h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        src, dst = edge_index
        agg = torch.zeros_like(h).index_add_(0, dst, h[src])
        deg = torch.zeros(h.size(0)).index_add_(0, dst, torch.ones(dst.numel())).clamp(min=1)
        return self.self_lin(h) + self.neigh_lin(agg / deg[:, None])


class GraphSAGE(nn.Module):
    def __init__(self, d_in: int, hidden: int, classes: int, dropout: float):
        super().__init__()
        self.conv1 = SAGELayer(d_in, hidden)
        self.relu = nn.ReLU()
        self.drop = nn.Dropout(dropout)
        self.conv2 = SAGELayer(hidden, classes)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.drop(self.relu(self.conv1(x, edge_index))), edge_index)


def sage_nodes(
    path: str,
    blocks: int = 5,
    size: int = 60,
    hidden: int = 32,
    lr: float = 1e-2,
    dropout: float = 0.5,
    steps: int = 200,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """Full-batch node classification on a stochastic block graph with 20% of nodes labelled
    for training; Adam with weight decay 5e-4; validation accuracy every 20 steps."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    x, edge_index, y = _data.block_graph(g, blocks, size, 0.1, 0.01, 16)
    train_mask = torch.rand(len(y), generator=g) < 0.2
    model = GraphSAGE(16, hidden, blocks, dropout)
    if bug == "dead_relu_init":
        nn.init.constant_(model.conv1.self_lin.bias, -10.0)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for step in range(steps):
        model.train()
        opt.zero_grad()
        out = model(x, edge_index)
        loss = loss_fn(out[train_mask], y[train_mask])
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if (step + 1) % 20 == 0:
            model.eval()
            with torch.no_grad():
                (model(x, edge_index)[~train_mask].argmax(1) == y[~train_mask]).float().mean()
    hook.close()
    return losses


class GIN(nn.Module):
    def __init__(self, d_in: int, hidden: int, layers: int, classes: int):
        super().__init__()
        self.eps = nn.Parameter(torch.zeros(layers))
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(d_in if i == 0 else hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                          nn.Linear(hidden, hidden), nn.ReLU())
            for i in range(layers)
        )  # fmt: skip
        self.readout = nn.Linear(hidden * layers, classes)

    def forward(self, x, edge_index, batch, n_graphs):
        src, dst = edge_index
        pooled = []
        for i, mlp in enumerate(self.mlps):
            agg = torch.zeros_like(x).index_add_(0, dst, x[src])
            x = mlp((1 + self.eps[i]) * x + agg)
            pooled.append(torch.zeros(n_graphs, x.size(1)).index_add_(0, batch, x))
        return self.readout(torch.cat(pooled, 1))


def _graph_batch(g: torch.Generator, n_graphs: int):
    """Small random graphs (8-16 nodes), label 1 for a ring with chords, 0 for a random tree
    with the same edge count; node features are the degree one-hot."""
    xs, edges, batch, labels, offset = [], [], [], [], 0
    for k in range(n_graphs):
        n = int(torch.randint(8, 17, (1,), generator=g))
        label = int(torch.rand(1, generator=g) < 0.5)
        if label:
            e = [(i, (i + 1) % n) for i in range(n)]
            e += [(i, (i + n // 2) % n) for i in range(0, n, 4)]
        else:
            e = [(i, int(torch.randint(0, i, (1,), generator=g))) for i in range(1, n)]
            e += [tuple(torch.randint(0, n, (2,), generator=g).tolist()) for _ in range(n // 4 + 1)]
        ei = torch.tensor(e).T
        ei = torch.cat([ei, ei.flip(0)], 1)
        deg = torch.zeros(n, dtype=torch.long).index_add_(0, ei[0], torch.ones(ei.size(1), dtype=torch.long))
        xs.append(F.one_hot(deg.clamp(max=7), 8).float())
        edges.append(ei + offset)
        batch.append(torch.full((n,), k))
        labels.append(label)
        offset += n
    return torch.cat(xs), torch.cat(edges, 1), torch.cat(batch), torch.tensor(labels)


def gin_graphs(
    path: str,
    hidden: int = 32,
    layers: int = 3,
    lr: float = 5e-3,
    batch: int = 32,
    steps: int = 150,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """Graph classification with a GIN (sum aggregation, learnable eps, BatchNorm, sum readout
    of every layer), mini-batches of graphs as one disconnected graph, Adam with StepLR."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    model = GIN(8, hidden, layers, 2)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, 50, 0.5)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    model.train()
    for _ in range(steps):
        x, ei, b, y = _graph_batch(g, batch)
        opt.zero_grad()
        loss = loss_fn(model(x, ei, b, batch), y)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    hook.close()
    return losses


class LinkEncoder(nn.Module):
    def __init__(self, d_in: int, hidden: int):
        super().__init__()
        self.conv1 = SAGELayer(d_in, hidden)
        self.act = nn.ELU()
        self.conv2 = SAGELayer(hidden, hidden)

    def forward(self, x, edge_index):
        return self.conv2(self.act(self.conv1(x, edge_index)), edge_index)


def link_prediction(
    path: str, hidden: int = 32, lr: float = 5e-3, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Link prediction: a two-layer SAGE encoder on the training edges, dot-product scores,
    BCEWithLogitsLoss against as many negative (random) pairs as positives each step."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    x, edge_index, _ = _data.block_graph(g, 4, 50, 0.15, 0.005, 16)
    keep = torch.rand(edge_index.size(1), generator=g) < 0.85
    train_edges = edge_index[:, keep]
    model = LinkEncoder(16, hidden)
    loss_fn = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    n = x.size(0)
    for _ in range(steps):
        opt.zero_grad()
        z = model(x, train_edges)
        pos = train_edges[:, torch.randint(0, train_edges.size(1), (256,), generator=g)]
        neg = torch.randint(0, n, (2, 256), generator=g)
        scores = torch.cat([(z[pos[0]] * z[pos[1]]).sum(1), (z[neg[0]] * z[neg[1]]).sum(1)])
        labels = torch.cat([torch.ones(256), torch.zeros(256)])
        loss = loss_fn(scores, labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    return losses


_sage = healthy("graphsage_nodes_dropout", "GNN", sage_nodes)

PIPELINES = [
    _sage,
    healthy(
        "graphsage_nodes_wide_nodropout",
        "GNN",
        sage_nodes,
        hidden=64,
        dropout=0.0,
        blocks=3,
        size=80,
        lr=5e-3,
        seed=1,
    ),
    healthy("gin_graph_classification", "GNN", gin_graphs),
    healthy("gnn_link_prediction", "GNN", link_prediction),
    buggy(_sage, "dead_relu_init"),
]
