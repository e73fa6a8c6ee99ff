"""Tiny-scale dlrmv4 trainer: a small HSTU ranker (``TinyHSTU``) streamed over the prepared Yambda cache, on CPU.

It follows the reference (mlcommons/training#889 at a67b8459, ``recommendation_v4/generative_recommenders``):

* data (``dlrm_v4/datasets/yambda.py``): the anchors are ``positions_L4086.npy``; the streaming
  windows cut ``anchor_ts_L4086.npy`` into days from the first anchor; training walks windows
  ``start_window .. start_window + train_windows - 1`` in time order (user-major inside a window, no
  shuffle) and evaluation scores the whole next window. Each anchor's history is gathered causally
  as ``_gather_interleaved_history`` does: the last ``history_per_pool`` listen_plus, like and skip
  events within ``scan_window`` events before the anchor, re-sorted by time, each tagged with its
  pool bits (listen_plus 1, like 2, skip 4). The label is the anchor's listen_plus bit.
* model (``modules/dlrm_hstu.py``, ``stu.py``, ``multitask_module.py``): a user token (uid
  embedding, the contextual entry), the history tokens (item + artist + album embeddings, an
  action embedding of the pool bits, a position and a log time-gap bucket embedding) and the
  candidate token go through causal STU layers (one fused UVQK projection with SiLU, pointwise
  SiLU attention scaled by the sequence length, an output projection of [norm(attention) * U, U, X]);
  the candidate position's output is the user embedding, an MLP of the candidate's
  item/artist/album embeddings the item embedding, and an MLP of their element-wise product the
  logit. Loss: binary cross-entropy with logits, scaled by 0.2.
* optimizers (``yambda_5b.gin``): Adam (betas 0.95/0.999, eps 1e-8, no decay) on the dense
  parameters with their gradients clipped to norm 1.0; RowWiseAdagrad (eps 1e-8) on the embedding
  tables; each ramped linearly from 0 to its learning rate over the warm-up steps (the reference uses one rate for
  both; the tiny tier's tables need a larger one).
* metric (``train/utils.py`` window AUC with torchrec's ``compute_auc``): ROC AUC of the predicted
  probabilities over the held-out window, logged as ``eval_accuracy`` with ``samples_count`` on the
  grid ceil(eval_every_data_pct x train_samples / GBS) x GBS; the run stops at the target.

Every mllog value is the value this loop uses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from mlperf_logging.mllog import constants

from mlperf_wf.benchmarks.dlrmv4 import yambda
from mlperf_wf.benchmarks.dlrmv4.hyperparameters import CAUSAL_MULTITASK_WEIGHT, Hyperparameters
from mlperf_wf.errors import UserError
from mlperf_wf.run.harness import TinyRun

LISTEN_PLUS_BIT, LIKE_BIT, SKIP_BIT = 1, 2, 4
"""Pool bits of action_weight (datasets/yambda.py LP_BIT, LIKE_BIT, SKIP_BIT)."""


@dataclass
class Samples:
    """Model inputs of a set of anchors: every array has one row per anchor."""

    uid: torch.Tensor
    """User row (index into unique_uids)."""
    history_items: torch.Tensor
    """(n, L) item ids, oldest first, padding (-1 -> 0 with mask) on the left."""
    history_actions: torch.Tensor
    """(n, L) pool bits, 0 on padding."""
    history_age: torch.Tensor
    """(n, L) seconds from the event to the anchor."""
    history_mask: torch.Tensor
    """(n, L) True on real events."""
    item: torch.Tensor
    """Candidate item id."""
    label: torch.Tensor
    """listen_plus of the candidate (float 0/1)."""

    def __len__(self) -> int:
        return len(self.uid)

    def rows(self, index: slice | torch.Tensor) -> Samples:
        return Samples(*(getattr(self, name)[index] for name in self.__dataclass_fields__))


@dataclass
class Store:
    """The prepared cache, read as DLRMv4YambdaDataset reads it (mmap'd .npy columns)."""

    columns: dict[str, np.ndarray]
    positions: np.ndarray
    anchor_ts: np.ndarray
    item_to_artist: np.ndarray
    item_to_album: np.ndarray
    num_users: int

    @property
    def num_items(self) -> int:
        return len(self.item_to_artist)

    def window_indices(self, window: int) -> np.ndarray:
        """Anchor indices whose timestamp is in ``[t_min + w*DAY, t_min + (w+1)*DAY)``, in user-major order."""
        low = int(self.anchor_ts.min()) + window * yambda.DAY
        return np.where((self.anchor_ts >= low) & (self.anchor_ts < low + yambda.DAY))[0]


def load_store(data_dir: Path) -> Store:
    """Open the cache (refusing one without _READY, as the reference rebuilds it then) and the item mappings."""
    import pandas as pd

    cache = data_dir / yambda.CACHE
    if not (cache / "_READY").exists():
        raise UserError(f"{cache}: no _READY sentinel; the cache is incomplete (the reference would rebuild it from train_sessions.parquet)")
    columns = {name: np.load(cache / f"{name}.npy", mmap_mode="r") for name in yambda.CACHE_COLUMNS}
    meta = json.loads((cache / "store_meta.json").read_text())
    if int(meta["total_events"]) != len(columns["flat_uid"]):
        raise UserError(f"{cache}/store_meta.json: total_events {meta['total_events']} but flat_uid has {len(columns['flat_uid'])} events")
    artist = pd.read_parquet(data_dir / yambda.MAPPINGS["artist"])
    album = pd.read_parquet(data_dir / yambda.MAPPINGS["album"])
    n_items = int(max(artist["item_id"].max(), album["item_id"].max())) + 1
    popularity = np.load(data_dir / yambda.PROCESSED / "item_popularity.npy", mmap_mode="r")
    if len(popularity) != n_items:
        # The reference refuses this too (DLRMv4YambdaDataset._load_metadata): it would resize the tables silently.
        raise UserError(f"{data_dir / yambda.PROCESSED}/item_popularity.npy has {len(popularity)} entries but the mappings describe {n_items} items")
    item_to_artist = np.zeros(n_items, dtype=np.int64)
    item_to_artist[artist["item_id"].to_numpy()] = artist["artist_id"].to_numpy()
    item_to_album = np.zeros(n_items, dtype=np.int64)
    item_to_album[album["item_id"].to_numpy()] = album["album_id"].to_numpy()
    return Store(
        columns,
        np.load(cache / f"{yambda.ANCHOR_FILES[0]}.npy"),
        np.load(cache / f"{yambda.ANCHOR_FILES[1]}.npy"),
        item_to_artist,
        item_to_album,
        int(meta["num_users"]),
    )


def gather(store: Store, anchors: np.ndarray, hp: Hyperparameters) -> Samples:
    """Model inputs of ``anchors`` (indices into positions): the interleaved three-pool history before each."""
    cols = store.columns
    flat = store.positions[anchors]
    uid = np.asarray(cols["flat_uid"][flat])
    low = np.maximum(np.asarray(cols["user_start"])[uid], flat - hp.scan_window)
    k = hp.history_per_pool
    picked, bits = [], []
    for name, bit in (("flat_is_listen_plus", LISTEN_PLUS_BIT), ("flat_is_like", LIKE_BIT), ("flat_is_skip", SKIP_BIT)):
        pool = np.flatnonzero(np.asarray(cols[name]))
        end = np.searchsorted(pool, flat)  # pool events strictly before the anchor
        index = end[:, None] + np.arange(-k, 0)[None, :]
        where = pool[np.clip(index, 0, max(len(pool) - 1, 0))] if len(pool) else np.zeros_like(index)
        valid = (index >= 0) & (where >= low[:, None])
        picked.append(np.where(valid, where, -1))
        bits.append(np.where(valid, bit, 0))
    position = np.concatenate(picked, axis=1)
    action = np.concatenate(bits, axis=1)
    order = np.argsort(position, axis=1, kind="stable")  # padding (-1) first, then oldest to newest
    position = np.take_along_axis(position, order, axis=1)
    action = np.take_along_axis(action, order, axis=1)
    mask = position >= 0
    safe = np.where(mask, position, 0)
    items = np.where(mask, np.asarray(cols["flat_item_ids"])[safe], 0)
    ts = np.asarray(cols["flat_timestamps"])
    age = np.where(mask, ts[flat][:, None] - ts[safe], 0)
    return Samples(
        uid=torch.from_numpy(np.searchsorted(np.asarray(cols["unique_uids"]), uid)),
        history_items=torch.from_numpy(items),
        history_actions=torch.from_numpy(action),
        history_age=torch.from_numpy(age),
        history_mask=torch.from_numpy(mask),
        item=torch.from_numpy(np.asarray(cols["flat_item_ids"])[flat]),
        label=torch.from_numpy(np.asarray(cols["flat_is_listen_plus"])[flat].astype(np.float32)),
    )


class STULayer(torch.nn.Module):
    """One HSTU layer (stu.STULayer): fused UVQK + SiLU, pointwise SiLU attention, gated output projection."""

    def __init__(self, dim: int, heads: int, head_dim: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.input_norm = torch.nn.LayerNorm(dim)
        self.uvqk = torch.nn.Linear(dim, 4 * heads * head_dim)
        self.attention_norm = torch.nn.LayerNorm(heads * head_dim)
        self.output = torch.nn.Linear(2 * heads * head_dim + dim, dim)  # [norm(attention) * U, U, X]
        self.dropout = torch.nn.Dropout(dropout)
        torch.nn.init.xavier_uniform_(self.uvqk.weight)
        torch.nn.init.zeros_(self.uvqk.bias)
        torch.nn.init.xavier_uniform_(self.output.weight)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        normed = self.input_norm(x)
        u, v, q, k = torch.nn.functional.silu(self.uvqk(normed)).split(self.heads * self.head_dim, dim=-1)

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, length, self.heads, self.head_dim).transpose(1, 2)

        scores = torch.nn.functional.silu(heads(q) @ heads(k).transpose(-1, -2)) / length
        attended = (scores * allowed[:, None]) @ heads(v)
        attended = attended.transpose(1, 2).reshape(batch, length, -1)
        mixed = torch.cat([self.attention_norm(attended) * u, u, normed], dim=-1)
        return x + self.dropout(self.output(mixed))


class TinyHSTU(torch.nn.Module):
    """A small DlrmHSTU ranker: sparse embedding tables, an STU stack over the user's sequence, item MLP, task head."""

    def __init__(self, store: Store, hp: Hyperparameters) -> None:
        super().__init__()
        d = hp.embedding_dim
        n_artists, n_albums = int(store.item_to_artist.max()) + 1, int(store.item_to_album.max()) + 1

        def table(rows: int) -> torch.nn.Embedding:
            # TorchRec's default bounds, as configs._uniform_init_bounds.
            embedding = torch.nn.Embedding(rows, d)
            torch.nn.init.uniform_(embedding.weight, -1 / rows**0.5, 1 / rows**0.5)
            return embedding

        self.sparse = torch.nn.ModuleDict(
            {"item_id": table(store.num_items), "artist_id": table(n_artists), "album_id": table(n_albums), "uid": table(store.num_users)}
        )
        self.register_buffer("item_to_artist", torch.from_numpy(store.item_to_artist), persistent=False)
        self.register_buffer("item_to_album", torch.from_numpy(store.item_to_album), persistent=False)
        self.history_mlp = torch.nn.Linear(3 * d, d)
        self.action = torch.nn.Embedding(8, d)
        torch.nn.init.normal_(self.action.weight, std=0.1)
        self.position = torch.nn.Embedding(hp.max_sequence_length, d)
        self.time = torch.nn.Embedding(hp.time_buckets, d)
        self.time_buckets = hp.time_buckets
        self.input_dropout = torch.nn.Dropout(2 * hp.dropout)
        self.layers = torch.nn.ModuleList(STULayer(d, hp.num_heads, hp.head_dim, hp.dropout) for _ in range(hp.num_layers))
        self.output_norm = torch.nn.LayerNorm(d)
        self.item_mlp = torch.nn.Sequential(torch.nn.Linear(3 * d, d), torch.nn.SiLU(), torch.nn.LayerNorm(d), torch.nn.Linear(d, d), torch.nn.LayerNorm(d))
        self.head = torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.SiLU(), torch.nn.LayerNorm(d), torch.nn.Linear(d, 1))

    def item_features(self, items: torch.Tensor) -> torch.Tensor:
        return torch.cat(
            [self.sparse["item_id"](items), self.sparse["artist_id"](self.item_to_artist[items]), self.sparse["album_id"](self.item_to_album[items])], dim=-1
        )

    def forward(self, s: Samples) -> torch.Tensor:
        """One listen_plus logit per anchor."""
        history = self.history_mlp(self.item_features(s.history_items)) + self.action(s.history_actions)
        age_bucket = torch.clamp(torch.log2(s.history_age.float().clamp(min=1)).long(), max=self.time_buckets - 1)
        history = history + self.time(age_bucket)
        candidate = self.history_mlp(self.item_features(s.item))[:, None]
        sequence = torch.cat([self.sparse["uid"](s.uid)[:, None], history, candidate], dim=1)
        length = sequence.shape[1]
        sequence = self.input_dropout(sequence + self.position(torch.arange(length)))
        valid = torch.cat([torch.ones_like(s.history_mask[:, :1]), s.history_mask, torch.ones_like(s.history_mask[:, :1])], dim=1)
        causal = torch.tril(torch.ones(length, length, dtype=torch.bool))
        allowed = (causal[None] & valid[:, None, :] & valid[:, :, None]).float()
        for layer in self.layers:
            sequence = layer(sequence, allowed)
        user = self.output_norm(sequence[:, -1])
        item = self.item_mlp(self.item_features(s.item))
        return self.head(user * item).squeeze(-1)


class RowWiseAdagrad(torch.optim.Optimizer):
    """FBGEMM's row-wise Adagrad (the sparse optimizer): one accumulator per row, the mean of its squared gradient."""

    def __init__(self, params: list[torch.nn.Parameter], lr: float, eps: float = 1e-8) -> None:
        super().__init__(params, {"lr": lr, "eps": eps})

    @torch.no_grad()
    def step(self, closure: object = None) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "sum" not in state:
                    state["sum"] = torch.zeros(p.shape[0], dtype=p.dtype)
                grad = p.grad
                touched = grad.abs().sum(dim=1) > 0  # rows looked up in this batch
                state["sum"] += torch.where(touched, grad.pow(2).mean(dim=1), 0.0)
                p -= group["lr"] * grad / (state["sum"].sqrt()[:, None] + group["eps"])


def window_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """ROC AUC as torchrec's compute_auc: sort by score (descending), trapezoid of cumulative true/false positives."""
    order = torch.argsort(scores, descending=True)
    labels = labels[order].double()
    true_pos = torch.cumsum(labels, 0)
    false_pos = torch.cumsum(1 - labels, 0)
    if true_pos[-1] == 0 or false_pos[-1] == 0:
        return 0.5
    tpr = torch.cat([torch.zeros(1, dtype=torch.double), true_pos / true_pos[-1]])
    fpr = torch.cat([torch.zeros(1, dtype=torch.double), false_pos / false_pos[-1]])
    return float(torch.trapezoid(tpr, fpr))


def evaluate(model: torch.nn.Module, samples: Samples, batch: int = 1024) -> float:
    model.eval()
    with torch.no_grad():
        scores = torch.cat([torch.sigmoid(model(samples.rows(slice(i, i + batch)))) for i in range(0, len(samples), batch)])
    model.train()
    return window_auc(scores, samples.label)


def popularity_auc(store: Store, train: Samples, held_out: Samples) -> float:
    """AUC of the popularity-only baseline: each item's listen_plus rate over the training anchors (a prior for unseen items)."""
    n = store.num_items
    plus = torch.bincount(train.item, weights=train.label, minlength=n)
    seen = torch.bincount(train.item, minlength=n).double()
    rate = (plus + train.label.mean()) / (seen + 1)
    return window_auc(rate[held_out.item], held_out.label)


def split(store: Store, hp: Hyperparameters, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(training anchors in streaming order, held-out anchors of the next window)."""
    rng = np.random.default_rng(seed)
    windows = [store.window_indices(w) for w in range(hp.start_window, hp.start_window + hp.train_windows)]
    if hp.shuffle_within_window:
        windows = [rng.permutation(w) for w in windows]
    train = np.concatenate(windows)
    held_out = store.window_indices(hp.start_window + hp.train_windows)
    if len(train) == 0 or len(held_out) == 0:
        raise UserError(
            f"dlrmv4: windows {hp.start_window}..{hp.start_window + hp.train_windows} hold {len(train)} training and {len(held_out)} "
            "evaluation anchors; choose start_window/train_windows inside the data's days"
        )
    return train, held_out


def build_model(store: Store, hp: Hyperparameters, seed: int) -> TinyHSTU:
    torch.manual_seed(seed)
    return TinyHSTU(store, hp)


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Stream the training windows to the target (or max_passes); the harness logs the preamble and hyperparameters."""
    rank, world_size = run.rank, run.world_size
    local_batch = hp.global_batch_size // world_size
    store = load_store(run.spec.data_dir)
    model = build_model(store, hp, run.spec.seed)
    run.config_unsharded(model)
    run.begin()
    train_idx, held_out_idx = split(store, hp, run.spec.seed)
    train_samples = len(train_idx)
    run.event(constants.TRAIN_SAMPLES, train_samples)
    run.event(constants.EVAL_SAMPLES, len(held_out_idx))
    data = gather(store, train_idx, hp)
    held_out = gather(store, held_out_idx, hp)
    dense = [p for name, p in model.named_parameters() if not name.startswith("sparse.")]
    adam = torch.optim.Adam(dense, lr=hp.learning_rate, betas=(hp.adam_beta_1, hp.adam_beta_2), eps=hp.adam_epsilon, weight_decay=hp.weight_decay)
    adagrad = RowWiseAdagrad(list(model.sparse.parameters()), lr=hp.sparse_learning_rate, eps=hp.adam_epsilon)
    if world_size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    interval = hp.eval_interval_samples(train_samples)
    steps_per_pass = train_samples // hp.global_batch_size
    status, auc, samples_count, step = constants.ABORTED, float("nan"), 0, 0
    history = []
    run.block_start(samples_count=0)
    for _ in range(hp.max_passes):
        for pass_step in range(steps_per_pass):
            rows = slice(pass_step * hp.global_batch_size + rank * local_batch, pass_step * hp.global_batch_size + (rank + 1) * local_batch)
            batch = data.rows(rows)
            ramp = 1.0 if step >= hp.warmup_steps else (step + 1) / hp.warmup_steps
            for optimizer, target in ((adam, hp.learning_rate), (adagrad, hp.sparse_learning_rate)):
                for group in optimizer.param_groups:
                    group["lr"] = hp.warmup_start_lr + (target - hp.warmup_start_lr) * ramp
            loss = CAUSAL_MULTITASK_WEIGHT * torch.nn.functional.binary_cross_entropy_with_logits(model(batch), batch.label)
            adam.zero_grad()
            adagrad.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(dense, hp.gradient_clip_norm)
            adam.step()
            adagrad.step()
            step += 1
            samples_count = step * hp.global_batch_size
            if samples_count % interval:
                continue
            run.block_stop(samples_count=samples_count)
            run.eval_start(samples_count=samples_count)
            auc = evaluate(model.module if world_size > 1 else model, held_out)
            run.eval_result(auc, samples_count=samples_count)
            history.append({"samples_count": samples_count, "eval_accuracy": auc, "seconds": run.seconds})
            if run.spec.reached(auc):
                status = constants.SUCCESS
                break
            run.block_start(samples_count=samples_count)
        if status == constants.SUCCESS:
            break
    else:
        run.block_stop(samples_count=samples_count)
    run.finish(status, samples_count=samples_count)
    return {"status": status, "samples_count": samples_count, "eval_accuracy": auc, "seconds": run.seconds, "history": history}
