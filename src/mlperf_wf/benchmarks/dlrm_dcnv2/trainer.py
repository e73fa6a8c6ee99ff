"""Tiny-scale dlrm_dcnv2 trainer: DLRM with DCNv2 cross layers on the prepared multi-hot day files, on CPU.

It follows the reference (training:recommendation_v2/torchrec_dlrm/dlrm_main.py at aa344c7,
``--interaction_type=dcn --adagrad``): the days are read as the reference's loader reads
them (days 0-22 train, the first half of day 23 validates), the model is TorchRec's
``DLRM_DCN`` layer for layer in pure torch, named here as the stand-in (TorchRec's own
modules need fbgemm kernels; see README.md): a bottom MLP on the 13 dense features, one
sum-pooled embedding bag per categorical feature over its multi-hot ids, the concatenation
through low-rank DCNv2 cross layers ``x_{l+1} = x_0 * (W_l (V_l x_l) + b_l) + x_l``, then
the top MLP to one logit. Adagrad (no decay, no warm-up, eps 1e-8) updates the
tables at ``learning_rate`` and the MLPs at ``dense_learning_rate``, binary cross-entropy is the loss, and the validation
AUROC is evaluated every ``eval_every_samples`` rows and logged with ``epoch_num`` (the
fraction of the epoch, as the reference). The run stops at the target from the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from mlperf_logging.mllog import constants

from mlperf_wf.benchmarks.dlrm_dcnv2 import criteo
from mlperf_wf.benchmarks.dlrm_dcnv2.hyperparameters import Hyperparameters
from mlperf_wf.run.harness import TinyRun


@dataclass
class Split:
    """Rows of one split in memory: dense (n x 13 float32), multi-hot ids per feature, labels (n float32)."""

    dense: torch.Tensor
    sparse: list[torch.Tensor]
    labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.labels)

    def rows(self, index: torch.Tensor | slice) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
        return self.dense[index], [ids[index] for ids in self.sparse], self.labels[index]


def read_days(data_dir: Path, days: list[int], half: str | None = None) -> Split:
    """The rows of ``days`` as the reference's MultiHotCriteoIterDataPipe reads them.

    ``half`` ``"val"``/``"test"`` keeps the first/second half of a single day (the
    reference splits day 23 at ``ceil(rows / 2)``).
    """
    dense, labels = [], []
    sparse: list[list[np.ndarray]] = [[] for _ in range(criteo.SPARSE_FEATURES)]
    for day in days:
        names = criteo.day_files(day)
        day_dense = np.load(data_dir / names["dense"], mmap_mode="r")
        day_labels = np.load(data_dir / names["labels"], mmap_mode="r")
        rows = slice(None)
        if half is not None:
            middle = len(day_dense) // 2 + len(day_dense) % 2
            rows = slice(None, middle) if half == "val" else slice(middle, None)
        dense.append(np.asarray(day_dense[rows]))
        labels.append(np.asarray(day_labels[rows]).reshape(-1))
        for k in range(criteo.SPARSE_FEATURES):
            sparse[k].append(np.asarray(criteo.load_multi_hot(data_dir / names["sparse"], k)[rows]))
    return Split(
        torch.from_numpy(np.concatenate(dense)),
        [torch.from_numpy(np.concatenate(parts).astype(np.int64)) for parts in sparse],
        torch.from_numpy(np.concatenate(labels).astype(np.float32)),
    )


def mlp(widths: list[int], last_activation: bool) -> torch.nn.Sequential:
    """Linear layers of ``widths`` with ReLU between them (and after the last when asked), as torchrec's MLP."""
    layers: list[torch.nn.Module] = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2 or last_activation:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


class LowRankCrossNet(torch.nn.Module):
    """torchrec.modules.crossnet.LowRankCrossNet: ``x_{l+1} = x_0 * (W_l (V_l x_l) + b_l) + x_l``."""

    def __init__(self, width: int, layers: int, rank: int) -> None:
        super().__init__()
        self.v = torch.nn.ModuleList(torch.nn.Linear(width, rank, bias=False) for _ in range(layers))
        self.w = torch.nn.ModuleList(torch.nn.Linear(rank, width, bias=True) for _ in range(layers))

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for v, w in zip(self.v, self.w, strict=True):
            x = x0 * w(v(x)) + x
        return x


class DLRMDCN(torch.nn.Module):
    """torchrec.models.experimental... DLRM_DCN (the reference's ``--interaction_type=dcn``) in pure torch."""

    def __init__(self, table_sizes: list[int], hp: Hyperparameters) -> None:
        super().__init__()
        dim = hp.embedding_dim
        self.embeddings = torch.nn.ModuleList(torch.nn.EmbeddingBag(n, dim, mode="sum") for n in table_sizes)
        for table in self.embeddings:
            # torchrec's EmbeddingBagConfig default init: uniform(-sqrt(1/n), sqrt(1/n)).
            bound = (1.0 / table.num_embeddings) ** 0.5
            torch.nn.init.uniform_(table.weight, -bound, bound)
        self.dense_arch = mlp([criteo.DENSE_FEATURES, *hp.widths("dense_arch_layer_sizes")], last_activation=True)
        width = dim * (len(table_sizes) + 1)
        self.crossnet = LowRankCrossNet(width, hp.dcn_num_layers, hp.dcn_low_rank_dim)
        self.over_arch = mlp([width, *hp.widths("over_arch_layer_sizes")], last_activation=False)

    def forward(self, dense: torch.Tensor, sparse: list[torch.Tensor]) -> torch.Tensor:
        pooled = [table(ids) for table, ids in zip(self.embeddings, sparse, strict=True)]
        x = torch.cat([self.dense_arch(dense), *pooled], dim=1)
        return self.over_arch(self.crossnet(x)).squeeze(1)


def parameter_groups(model: torch.nn.Module, hp: Hyperparameters) -> list[dict]:
    """The tables at ``learning_rate``, everything else at ``dense_learning_rate`` (one optimizer, as the
    reference's CombinedOptimizer of the fused table Adagrad and the dense Adagrad)."""
    tables = [p for name, p in model.named_parameters() if ".embeddings." in f".{name}"]
    dense = [p for name, p in model.named_parameters() if ".embeddings." not in f".{name}"]
    return [{"params": tables, "lr": hp.learning_rate}, {"params": dense, "lr": hp.dense_learning_rate}]


def auroc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve (the Mann-Whitney statistic with average ranks for ties), as torchmetrics' binary AUROC."""
    order = torch.argsort(scores)
    sorted_scores = scores[order]
    ranks = torch.empty(len(scores), dtype=torch.float64)
    # Average rank over runs of equal scores.
    _, inverse, counts = torch.unique_consecutive(sorted_scores, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).to(torch.float64)
    average = ends - (counts.to(torch.float64) - 1) / 2
    ranks[order] = average[inverse]
    positives = labels > 0.5
    n_pos = int(positives.sum())
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"AUROC needs both classes; got {n_pos} positives and {n_neg} negatives")
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate(model: torch.nn.Module, split: Split, batch_size: int) -> float:
    """Validation AUROC of ``model`` over ``split``."""
    model.eval()
    with torch.no_grad():
        scores = torch.cat([model(*split.rows(slice(s, s + batch_size))[:2]) for s in range(0, len(split), batch_size)])
    model.train()
    return auroc(torch.sigmoid(scores), split.labels)


def table_sizes_of(data_dir: Path) -> list[int]:
    """Embedding rows per feature: what the preparation recorded (``tables.json``)."""
    import json

    return [int(n) for n in json.loads((data_dir / "tables.json").read_text())["num_embeddings_per_feature"]]


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Train to the target (or max_epochs); the harness logs the preamble and hyperparameters."""
    rank, world_size = run.rank, run.world_size
    local_batch = hp.global_batch_size // world_size
    torch.manual_seed(run.spec.seed)
    model: torch.nn.Module = DLRMDCN(table_sizes_of(run.spec.data_dir), hp)
    if world_size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adagrad(parameter_groups(model, hp), **hp.adagrad_arguments())
    run.begin()
    # The clock runs before the days are read, as the rules ask.
    train_split = read_days(run.spec.data_dir, list(range(criteo.DAYS - 1)))
    val_split = read_days(run.spec.data_dir, [criteo.DAYS - 1], half="val")
    steps_per_epoch = len(train_split) // hp.global_batch_size
    run.event(constants.TRAIN_SAMPLES, steps_per_epoch * hp.global_batch_size)
    val_mine = Split(*val_split.rows(slice(rank, None, world_size)))
    eval_every = max(1, hp.eval_every_samples // hp.global_batch_size)
    generator = torch.Generator().manual_seed(run.spec.seed)
    status, auc, epoch_num, history = constants.ABORTED, float("nan"), 0.0, []
    logged_eval_samples = False
    for epoch in range(hp.max_epochs):
        run.epoch_start(epoch_num=epoch)
        order = torch.randperm(len(train_split), generator=generator)
        for step in range(steps_per_epoch):
            batch = order[step * hp.global_batch_size : (step + 1) * hp.global_batch_size][rank * local_batch : (rank + 1) * local_batch]
            dense, sparse, labels = train_split.rows(batch)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(dense, sparse), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if (step + 1) % eval_every and step + 1 != steps_per_epoch:
                continue
            epoch_num = round(epoch + (step + 1) / steps_per_epoch, 4)
            run.eval_start(epoch_num=epoch_num)
            if world_size > 1:
                # Every rank scores its slice; rank 0 computes the AUROC over all of them, as torchmetrics does.
                model.eval()
                with torch.no_grad():
                    scores = torch.sigmoid(model(val_mine.dense, val_mine.sparse))
                model.train()
                gathered = [torch.empty(0)] * world_size
                torch.distributed.all_gather_object(gathered, (scores, val_mine.labels))
                auc = auroc(torch.cat([s for s, _ in gathered]), torch.cat([y for _, y in gathered]))
            else:
                auc = evaluate(model, val_mine, hp.eval_batch_size)
            run.eval_result(auc, epoch_num=epoch_num)
            if not logged_eval_samples:
                # Once, after the first evaluation, as dlrm_main.py:424 logs it.
                run.event(constants.EVAL_SAMPLES, len(val_split), epoch_num=epoch_num)
                logged_eval_samples = True
            history.append({"epoch_num": epoch_num, "eval_accuracy": auc, "seconds": run.seconds})
            if run.spec.reached(auc):
                status = constants.SUCCESS
                break
        run.epoch_stop(epoch_num=epoch)
        if status == constants.SUCCESS:
            break
    run.finish(status, epoch_num=epoch_num)
    return {"status": status, "epoch_num": epoch_num, "eval_accuracy": auc, "seconds": run.seconds, "history": history}
