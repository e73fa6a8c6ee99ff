"""Tiny Yambda-5b stand-in in the published (Option A, "prepared download") layout of the dlrmv4 reference.

The reference (mlcommons/training#889 at a67b8459, ``recommendation_v4/``) reads a flat-event mmap
cache, ``processed_5b/hstu_cache_L4086/``, that ``DLRMv4YambdaDataset._ensure_cache_built``
(``datasets/yambda.py:385-544``) derives from ``train_sessions.parquet``; MLCommons publishes the
cache itself. Its files, as that code writes them (one entry per event, sorted by user then time,
unless said otherwise):

======================== ======= ===========================================================
file                     dtype   meaning
======================== ======= ===========================================================
flat_uid.npy             int64   user id of the event
flat_item_ids.npy        int64   track id
flat_timestamps.npy      int64   seconds
flat_event_types.npy     int64   0 listen, 1 like, 2 dislike, 3 unlike, 4 undislike
flat_played_ratio.npy    float32 percent of the track played (0 where not a listen)
flat_is_organic.npy      int8    1 when the user found the track themselves
flat_is_listen_plus.npy  bool    listen with played_ratio >= 50 (the label)
flat_is_like.npy         bool    event type like
flat_is_skip.npy         bool    listen with played_ratio < 50
user_start.npy           int64   per uid (0..max uid): first flat index, -1 if absent
user_end.npy             int64   per uid: one past the last flat index, -1 if absent
unique_uids.npy          int64   the users present, ascending
positions_L4086.npy      int64   anchors: flat indices of listens with >= 4086 earlier events of the user
anchor_ts_L4086.npy      int64   per anchor: its timestamp (the streaming windows cut on it)
store_meta.json                  {"num_users", "total_events"}
_READY                           empty sentinel, written last
======================== ======= ===========================================================

plus ``processed_5b/item_popularity.npy`` (int64 train-event count per item id) and
``shared_metadata/{artist,album}_item_mapping.parquet`` (``item_id`` -> ``artist_id``/``album_id``).

The hidden structure that makes AUC meaningful: every artist has a latent taste vector, a track's
vector is its artist's plus noise, every user has a taste vector, and a listen is a listen_plus
with probability ``sigmoid(affinity * <user, track> + track bias)``. Track popularity is Zipf and
the track bias is its own draw, so knowing only the popular tracks (or only the bias) stays well
below the target; the history of a user's listens and skips reveals their taste. Each user has
more than 4086 events (the reference's history floor), so the anchors are real L4086 anchors;
the tiny trainer then reads only the most recent events of each history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PROCESSED = "processed_5b"
CACHE = f"{PROCESSED}/hstu_cache_L4086"
HISTORY_FLOOR = 4086
"""The reference's history_length = min_history (yambda_5b.gin): an anchor needs this many earlier events."""
DAY = 86400
"""Seconds per streaming window (get_dataset.streaming_window_seconds)."""
LISTEN, LIKE = 0, 1
LISTEN_PLUS_THRESHOLD = 50
"""played_ratio percent from which a listen is a listen_plus (datasets/yambda.py LISTEN_PLUS_THRESHOLD)."""
CACHE_COLUMNS = (
    "flat_uid",
    "flat_item_ids",
    "flat_timestamps",
    "flat_event_types",
    "flat_played_ratio",
    "flat_is_listen_plus",
    "flat_is_like",
    "flat_is_skip",
    "flat_is_organic",
    "user_start",
    "user_end",
    "unique_uids",
)
"""_FlatEventStore._MMAP_COLS: the columns load_mmap opens."""
ANCHOR_FILES = (f"positions_L{HISTORY_FLOOR}", f"anchor_ts_L{HISTORY_FLOOR}")
MAPPINGS = {"artist": "shared_metadata/artist_item_mapping.parquet", "album": "shared_metadata/album_item_mapping.parquet"}


@dataclass(frozen=True)
class Shape:
    """Size of the tiny stand-in."""

    users: int = 64
    """Users (the full dataset has 1,000,000)."""
    uid_space: int = 300
    """User ids are drawn from 0..uid_space-1, so user_start has gaps (-1) as in the real cache."""
    artists: int = 30
    albums_per_artist: int = 2
    tracks_per_album: int = 6
    history_days: int = 30
    """Days of the first HISTORY_FLOOR events of every user (no anchors there)."""
    anchor_days: int = 8
    """Days after that, holding each user's anchor-eligible events: the streaming windows."""
    anchor_events: tuple[int, int] = (360, 520)
    """Range of each user's events after the floor."""
    taste_dim: int = 4
    affinity: float = 3.0
    """Weight of <user, track> in the listen_plus logit."""
    bias_scale: float = 0.6
    """Standard deviation of a track's own listen_plus bias."""

    @property
    def tracks(self) -> int:
        return self.artists * self.albums_per_artist * self.tracks_per_album


@dataclass(frozen=True)
class World:
    """The hidden truth behind the generated events (kept for tests: the best possible AUC)."""

    user_taste: np.ndarray
    track_taste: np.ndarray
    track_bias: np.ndarray
    track_artist: np.ndarray
    track_album: np.ndarray
    affinity: float

    def listen_plus_logit(self, users: np.ndarray, tracks: np.ndarray) -> np.ndarray:
        """The true log-odds that user row ``users`` fully listens to ``tracks``."""
        return self.affinity * np.einsum("nd,nd->n", self.user_taste[users], self.track_taste[tracks]) + self.track_bias[tracks]


def make_world(rng: np.random.Generator, shape: Shape) -> World:
    artist_taste = rng.normal(size=(shape.artists, shape.taste_dim)) / np.sqrt(shape.taste_dim)
    track_artist = np.repeat(np.arange(shape.artists), shape.albums_per_artist * shape.tracks_per_album)
    track_album = np.repeat(np.arange(shape.artists * shape.albums_per_artist), shape.tracks_per_album)
    track_taste = artist_taste[track_artist] + 0.3 * rng.normal(size=(shape.tracks, shape.taste_dim)) / np.sqrt(shape.taste_dim)
    user_taste = rng.normal(size=(shape.users, shape.taste_dim))
    track_bias = shape.bias_scale * rng.normal(size=shape.tracks)
    return World(user_taste, track_taste, track_bias, track_artist, track_album, shape.affinity)


def make_events(seed: int, shape: Shape = Shape()) -> tuple[dict[str, np.ndarray], World]:
    """The flat event columns (sorted by uid, then time) and the world they were drawn from."""
    rng = np.random.default_rng(seed)
    world = make_world(rng, shape)
    uids = np.sort(rng.choice(shape.uid_space, size=shape.users, replace=False))
    popularity = 1.0 / np.arange(1, shape.tracks + 1) ** 0.8
    popularity = popularity[rng.permutation(shape.tracks)]
    popularity /= popularity.sum()
    columns: dict[str, list[np.ndarray]] = {name: [] for name in ("uid", "item", "ts", "type", "ratio", "organic")}
    for row, uid in enumerate(uids):
        n_after = int(rng.integers(*shape.anchor_events))
        # The first HISTORY_FLOOR events fall in the history days, the rest in the anchor days.
        ts = np.concatenate(
            [
                np.sort(rng.integers(0, shape.history_days * DAY, size=HISTORY_FLOOR)),
                np.sort(rng.integers(shape.history_days * DAY, (shape.history_days + shape.anchor_days) * DAY, size=n_after)),
            ]
        )
        n = len(ts)
        items = rng.choice(shape.tracks, size=n, p=popularity)
        full = rng.random(n) < 1.0 / (1.0 + np.exp(-world.listen_plus_logit(np.full(n, row), items)))
        kind = rng.random(n)
        # 94 % listens; likes go to tracks the user fully listens to; a few dislikes/unlikes/undislikes.
        types = np.where(kind < 0.94, LISTEN, np.where(full & (kind < 0.985), LIKE, rng.integers(2, 5, size=n)))
        ratio = np.where(full, rng.uniform(LISTEN_PLUS_THRESHOLD, 100, size=n), rng.uniform(0, LISTEN_PLUS_THRESHOLD, size=n))
        ratio = np.where(types == LISTEN, ratio, 0.0).astype(np.float32)
        columns["uid"].append(np.full(n, uid, dtype=np.int64))
        columns["item"].append(items.astype(np.int64))
        columns["ts"].append(ts.astype(np.int64))
        columns["type"].append(types.astype(np.int64))
        columns["ratio"].append(ratio)
        columns["organic"].append((rng.random(n) < 0.3).astype(np.int8))
    flat = {name: np.concatenate(parts) for name, parts in columns.items()}
    return flat, world


def cache_arrays(flat: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The hstu_cache_L4086 arrays, derived as _ensure_cache_built derives them."""
    flat_uid = flat["uid"]
    is_listen = flat["type"] == LISTEN
    starts = np.concatenate([[0], np.where(np.diff(flat_uid) != 0)[0] + 1])
    ends = np.concatenate([starts[1:], [len(flat_uid)]])
    uid_vals = flat_uid[starts]
    user_start = np.full(int(uid_vals.max()) + 1, -1, dtype=np.int64)
    user_end = np.full(int(uid_vals.max()) + 1, -1, dtype=np.int64)
    user_start[uid_vals] = starts
    user_end[uid_vals] = ends
    index = np.arange(len(flat_uid), dtype=np.int64)
    positions = np.where((index - user_start[flat_uid] >= HISTORY_FLOOR) & is_listen)[0].astype(np.int64)
    return {
        "flat_uid": flat_uid,
        "flat_item_ids": flat["item"],
        "flat_timestamps": flat["ts"],
        "flat_event_types": flat["type"],
        "flat_played_ratio": flat["ratio"],
        "flat_is_organic": flat["organic"],
        "flat_is_listen_plus": is_listen & (flat["ratio"] >= LISTEN_PLUS_THRESHOLD),
        "flat_is_like": flat["type"] == LIKE,
        "flat_is_skip": is_listen & (flat["ratio"] < LISTEN_PLUS_THRESHOLD),
        "user_start": user_start,
        "user_end": user_end,
        "unique_uids": uid_vals.astype(np.int64),
        ANCHOR_FILES[0]: positions,
        ANCHOR_FILES[1]: flat["ts"][positions],
    }


NOTICE = """Tiny stand-in for Yambda-5b (processed, MLCommons dlrmv4), generated by mlperf_wf.benchmarks.dlrmv4.yambda
with seed {seed}: {users} users, {events} events, {tracks} tracks. Synthetic; no Yandex data.
"""


def generate(out_dir: Path, seed: int, shape: Shape = Shape()) -> list[Path]:
    """Write the processed tree into ``out_dir`` with the published paths; return the files written."""
    import pandas as pd

    flat, world = make_events(seed, shape)
    arrays = cache_arrays(flat)
    cache = out_dir / CACHE
    cache.mkdir(parents=True, exist_ok=True)
    written = []
    for name, array in arrays.items():
        np.save(cache / f"{name}.npy", array)
        written.append(cache / f"{name}.npy")
    meta = {"num_users": len(arrays["unique_uids"]), "total_events": len(arrays["flat_uid"])}
    (cache / "store_meta.json").write_text(json.dumps(meta))
    written.append(cache / "store_meta.json")
    popularity = np.bincount(flat["item"], minlength=shape.tracks).astype(np.int64)
    np.save(out_dir / PROCESSED / "item_popularity.npy", popularity)
    written.append(out_dir / PROCESSED / "item_popularity.npy")
    tracks = np.arange(shape.tracks, dtype=np.int64)
    for kind, relative in MAPPINGS.items():
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        ids = world.track_artist if kind == "artist" else world.track_album
        pd.DataFrame({"item_id": tracks, f"{kind}_id": ids.astype(np.int64)}).to_parquet(path, index=False)
        written.append(path)
    (cache / "_READY").write_bytes(b"")
    written.append(cache / "_READY")
    notice = out_dir / "NOTICE.txt"
    notice.write_text(NOTICE.format(seed=seed, users=meta["num_users"], events=meta["total_events"], tracks=shape.tracks))
    written.append(notice)
    return written
