"""Tiny-scale rgat trainer: an R-GAT over the prepared IGBH-shaped graph, with neighbour sampling, on CPU.

It follows the reference (training:retired_benchmarks/rgat/train_rgnn_multi_gpu.py and
rgnn.py): the graph is read as the CSC arrays and fp16 features that the preparation
wrote (``full/processed/CSC/<etype>/indptr.pt``...), mini-batches of labelled train
papers get a sampled neighbourhood (``fan_out`` in-neighbours per hop and edge type,
without replacement, as GLT samples), an R-GAT of ``num_layers`` torch-geometric
``HeteroConv`` layers with one ``GATConv`` per edge type classifies the seed papers,
Adam minimises cross-entropy, and validation accuracy over the validation seeds is
evaluated every ``eval_every_epochs`` and logged with ``epoch_num`` (fractional, two
decimals, as the reference). The run stops at the target read from the compliance rules.
Every mllog value below is the value the loop uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from mlperf_logging.mllog import constants

from mlperf_wf.benchmarks.rgat.hyperparameters import Hyperparameters
from mlperf_wf.run.harness import TinyRun

PROCESSED = "full/processed"
LABEL_FILE = "node_label_2K.npy"
"""The reference trains on the 2K-class labels (--num_classes 2983)."""


@dataclass
class Graph:
    """The prepared graph: CSC per edge type (destination-indexed), features, labels and seeds."""

    csc: dict[tuple[str, str, str], tuple[torch.Tensor, torch.Tensor]]
    """(src, rel, dst) -> (indptr over dst nodes, src indices)."""
    features: dict[str, torch.Tensor]
    labels: torch.Tensor
    train_idx: torch.Tensor
    val_idx: torch.Tensor

    @property
    def num_classes(self) -> int:
        return int(self.labels.max()) + 1


def load_graph(data_dir: Path) -> Graph:
    """Read the prepared tree as the reference does (``--layout CSC --use_fp16``)."""
    import numpy as np

    root = data_dir / PROCESSED
    csc = {}
    for folder in sorted((root / "CSC").iterdir()):
        src, rel, dst = folder.name.split("__")
        csc[(src, rel, dst)] = (torch.load(folder / "indptr.pt"), torch.load(folder / "indices.pt"))
    node_types = {t for key in csc for t in (key[0], key[2])}
    features = {t: torch.load(root / t / "node_feat_fp16.pt").float() for t in sorted(node_types)}
    labels = torch.from_numpy(np.load(root / "paper" / LABEL_FILE)).long()
    return Graph(csc, features, labels, torch.load(root / "train_idx.pt"), torch.load(root / "val_idx.pt"))


def sample_in_neighbours(
    indptr: torch.Tensor, indices: torch.Tensor, nodes: torch.Tensor, k: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to ``k`` of each node's in-edges: (position in ``nodes`` of each sampled edge's node, its source id).

    Nodes with at most ``k`` in-edges keep all of them; the others keep the ``k`` with the
    smallest random keys, a uniform sample of their edges without replacement (a source
    repeats only where the edge list itself repeats it, as cites' doubled self loops).
    """
    start = indptr[nodes]
    degree = indptr[nodes + 1] - start
    owner = torch.repeat_interleave(torch.arange(len(nodes)), degree)
    if len(owner) == 0:
        return owner, owner
    offset = torch.arange(len(owner)) - torch.repeat_interleave(torch.cumsum(degree, 0) - degree, degree)
    edge = start[owner] + offset
    crowded = degree[owner] > k
    if bool(crowded.any()):
        keys = torch.rand(len(owner), generator=generator) + owner.to(torch.float64)
        order = torch.argsort(keys)  # groups stay in owner order, shuffled within
        rank = torch.empty_like(order)
        rank[order] = torch.arange(len(order)) - torch.repeat_interleave(torch.cumsum(degree, 0) - degree, degree)
        keep = ~crowded | (rank < k)
        owner, edge = owner[keep], edge[keep]
    return owner, indices[edge]


def sample_subgraph(graph: Graph, seeds: torch.Tensor, fan_outs: list[int], generator: torch.Generator) -> tuple[dict[str, torch.Tensor], dict]:
    """The sampled neighbourhood of ``seeds`` (papers): global ids per node type and local edge indices.

    Seeds are the first ``len(seeds)`` paper nodes of the result, as in torch-geometric's NeighborLoader.
    """
    nodes: dict[str, list[torch.Tensor]] = {"paper": [seeds]}
    index_of: dict[str, torch.Tensor] = {}
    count: dict[str, int] = {"paper": len(seeds)}
    for node_type, feats in graph.features.items():
        index_of[node_type] = torch.full((feats.shape[0],), -1, dtype=torch.long)
    index_of["paper"][seeds] = torch.arange(len(seeds))
    frontier = {"paper": seeds}
    edges: dict[tuple[str, str, str], list[torch.Tensor]] = {key: [] for key in graph.csc}
    for k in fan_outs:
        new_frontier: dict[str, list[torch.Tensor]] = {}
        for (src, rel, dst), (indptr, indices) in graph.csc.items():
            if dst not in frontier or len(frontier[dst]) == 0:
                continue
            owner, sources = sample_in_neighbours(indptr, indices, frontier[dst], k, generator)
            if len(sources) == 0:
                continue
            unseen = torch.unique(sources[index_of[src][sources] < 0])
            if len(unseen):
                index_of[src][unseen] = torch.arange(count.get(src, 0), count.get(src, 0) + len(unseen))
                count[src] = count.get(src, 0) + len(unseen)
                nodes.setdefault(src, []).append(unseen)
                new_frontier.setdefault(src, []).append(unseen)
            dst_local = index_of[dst][frontier[dst][owner]]
            edges[(src, rel, dst)].append(torch.stack([index_of[src][sources], dst_local]))
        frontier = {t: torch.cat(parts) for t, parts in new_frontier.items()}
    node_ids = {t: torch.cat(parts) for t, parts in nodes.items()}
    edge_index = {key: torch.cat(parts, dim=1) for key, parts in edges.items() if parts}
    return node_ids, edge_index


class RGAT(torch.nn.Module):
    """The reference's RGNN with model='rgat' (rgnn.py): per layer one GATConv per edge type, summed per
    destination type by HeteroConv; leaky ReLU and dropout between layers; a linear head on papers."""

    def __init__(self, edge_types: list[tuple[str, str, str]], in_channels: int, hp: Hyperparameters, num_classes: int) -> None:
        from torch_geometric.nn import GATConv, HeteroConv

        super().__init__()
        heads = hp.num_heads
        if hp.hidden_channels % heads:
            raise ValueError(f"hidden_channels {hp.hidden_channels} is not divisible by num_heads {heads}")
        self.convs = torch.nn.ModuleList(
            HeteroConv(
                {
                    key: GATConv(in_channels if i == 0 else hp.hidden_channels, hp.hidden_channels // heads, heads=heads, add_self_loops=False)
                    for key in edge_types
                }
            )
            for i in range(hp.num_layers)
        )
        self.dropout = torch.nn.Dropout(hp.dropout)
        self.head = torch.nn.Linear(hp.hidden_channels, num_classes)

    def forward(self, x: dict[str, torch.Tensor], edge_index: dict) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            # A node type that receives no messages in this layer drops out, as in the reference.
            edges = {key: value for key, value in edge_index.items() if key[0] in x and key[2] in x}
            x = conv(x, edges)
            if i != len(self.convs) - 1:
                x = {t: self.dropout(torch.nn.functional.leaky_relu(h)) for t, h in x.items()}
        return self.head(x["paper"])


def _forward(model: torch.nn.Module, graph: Graph, seeds: torch.Tensor, fan_outs: list[int], generator: torch.Generator) -> torch.Tensor:
    node_ids, edge_index = sample_subgraph(graph, seeds, fan_outs, generator)
    x = {t: graph.features[t][ids] for t, ids in node_ids.items()}
    return model(x, edge_index)[: len(seeds)]


def evaluate(model: torch.nn.Module, graph: Graph, seeds: torch.Tensor, hp: Hyperparameters, generator: torch.Generator) -> tuple[int, int]:
    """(correct, total) over ``seeds`` with sampled neighbourhoods, as the reference evaluates."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(seeds), hp.val_batch_size):
            batch = seeds[start : start + hp.val_batch_size]
            logits = _forward(model, graph, batch, hp.fan_outs(), generator)
            correct += int((logits.argmax(dim=1) == graph.labels[batch]).sum())
    model.train()
    return correct, len(seeds)


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Train to the target (or max_epochs); the harness logs the preamble and hyperparameters."""
    rank, world_size = run.rank, run.world_size
    local_batch = hp.global_batch_size // world_size
    fan_outs = hp.fan_outs()
    run.begin()
    # The clock runs before the graph is read, as the rules ask.
    graph = load_graph(run.spec.data_dir)
    run.event(constants.TRAIN_SAMPLES, len(graph.train_idx))
    run.event(constants.EVAL_SAMPLES, len(graph.val_idx))

    torch.manual_seed(run.spec.seed)
    widths = {f.shape[1] for f in graph.features.values()}
    if len(widths) != 1:
        raise ValueError(f"node feature widths differ ({sorted(widths)}); IGBH gives every node type the same width")
    model: torch.nn.Module = RGAT(list(graph.csc), widths.pop(), hp, graph.num_classes)
    generator = torch.Generator().manual_seed(run.spec.seed)
    if world_size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=hp.learning_rate, weight_decay=hp.weight_decay)
    # Every rank draws the same permutation and evaluation samples, then takes its own slice.
    sample_generator = torch.Generator().manual_seed(run.spec.seed * 1000 + rank)
    val_mine = graph.val_idx[rank::world_size]
    steps_per_epoch = len(graph.train_idx) // hp.global_batch_size
    eval_every = max(1, round(hp.eval_every_epochs * steps_per_epoch))
    status = constants.ABORTED
    accuracy = float("nan")
    epoch_num = 0.0
    history = []
    for epoch in range(hp.max_epochs):
        run.epoch_start(epoch_num=epoch)
        order = graph.train_idx[torch.randperm(len(graph.train_idx), generator=generator)]
        for step in range(steps_per_epoch):
            batch = order[step * hp.global_batch_size : (step + 1) * hp.global_batch_size][rank * local_batch : (rank + 1) * local_batch]
            logits = _forward(model, graph, batch, fan_outs, sample_generator)
            loss = torch.nn.functional.cross_entropy(logits, graph.labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if (step + 1) % eval_every and step + 1 != steps_per_epoch:
                continue
            epoch_num = round(epoch + (step + 1) / steps_per_epoch, 2)
            run.eval_start(epoch_num=epoch_num)
            correct, total = evaluate(model, graph, val_mine, hp, sample_generator)
            if world_size > 1:
                counts = torch.tensor([correct, total], dtype=torch.long)
                torch.distributed.all_reduce(counts)
                correct, total = int(counts[0]), int(counts[1])
            accuracy = correct / total
            run.eval_result(accuracy, epoch_num=epoch_num)
            history.append({"epoch_num": epoch_num, "eval_accuracy": accuracy, "seconds": run.seconds})
            if accuracy >= run.spec.target:
                status = constants.SUCCESS
                break
        run.epoch_stop(epoch_num=epoch)
        if status == constants.SUCCESS:
            break
    run.finish(status, epoch_num=epoch_num)
    return {"status": status, "epoch_num": epoch_num, "eval_accuracy": accuracy, "seconds": run.seconds, "history": history}
