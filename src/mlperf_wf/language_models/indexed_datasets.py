"""Preparation of published Megatron indexed datasets (the pre-tokenized C4 of the LLM benchmarks).

MLCommons publishes these already tokenized by the references' own preprocessing, and the references read
them as they are. Preparing one is therefore: open it with megatron-core's reader (which checks the
``.idx`` header, version and dtype), then hard-link the verified ``.bin``/``.idx`` into the shard.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.acquire.prepare import link_or_copy
from mlperf_wf.errors import UserError


def check_and_link(source_dir: Path, prefixes: list[str] | tuple[str, ...], out_dir: Path, scale: str) -> dict:
    """Check each ``source_dir/<prefix>`` pair, link it into ``out_dir`` and write ``prepared.json``
    (documents and tokens per dataset); a file megatron-core cannot read is one line naming it."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    out_dir.mkdir(parents=True, exist_ok=True)
    datasets = {}
    for prefix in prefixes:
        source = source_dir / prefix
        try:
            dataset = IndexedDataset(str(source))
        except Exception as err:  # any reader failure is a bad dataset, said in one line
            raise UserError(f"{source}.idx/.bin: not a Megatron indexed dataset megatron-core can read: {err}") from None
        datasets[prefix] = {"documents": len(dataset), "tokens": int(dataset.sequence_lengths.sum())}
        for suffix in ("bin", "idx"):
            link_or_copy(Path(f"{source}.{suffix}"), out_dir / f"{prefix}.{suffix}")
    summary = {"scale": scale, "datasets": datasets}
    (out_dir / "prepared.json").write_text(json.dumps(summary, indent=2))
    return summary


def shard_layout(shard: str, prefixes: list[str] | tuple[str, ...]) -> dict[str, str]:
    """The prepared tree of one shard holding ``prefixes``: each ``.bin``/``.idx`` and ``prepared.json``."""
    names = [f"{prefix}.{suffix}" for prefix in prefixes for suffix in ("bin", "idx")]
    return {name: f"{shard}/{name}" for name in [*names, "prepared.json"]}


@dataclass(frozen=True)
class LinkedPreparation:
    """The preparation (``shards``, ``layout``, ``prepare_shard``) of a benchmark whose reference reads published
    indexed datasets as they are: one shard that checks each pair with megatron-core's reader and links it.
    The reference builds its sample index at run time, so linking needs no splitting."""

    benchmark: str
    """The benchmark, named in errors."""
    prefixes: tuple[str, ...]
    """The datasets (path prefixes inside the ``data`` input) the reference opens."""
    shard: str = "c4"
    """The one shard's name."""

    def shards(self, scale: str) -> list[str]:
        """The one shard, at both scales."""
        return [self.shard]

    def layout(self, scale: str) -> dict[str, str]:
        """The prepared folder the trainer and the reference read: every ``.bin``/``.idx`` and ``prepared.json``."""
        return shard_layout(self.shard, self.prefixes)

    def prepare_shard(self, shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
        """:func:`check_and_link` of the ``data`` input into ``out_dir``."""
        if shard != self.shard:
            raise UserError(f"{self.benchmark}: unknown shard {shard!r}; known: {self.shard}")
        return check_and_link(inputs["data"], self.prefixes, out_dir, scale)
