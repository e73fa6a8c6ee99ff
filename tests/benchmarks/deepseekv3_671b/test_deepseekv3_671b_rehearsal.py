"""deepseekv3_671b on the cluster in a box: the starting checkpoint the reference opens is R2's published conversion.

pretrain_deepseek_v3_671b.py:198-205 loads ``/checkpoint`` at ``ckpt_step`` 0, so Megatron-Bridge v0.3.0 opens
``/checkpoint/iter_0000000`` as megatron-core's torch_dist checkpoint. Mounting the Hugging Face checkpoint there
(the catalog's ``deepseekv3_checkpoint_bf16``, which the reference README converts by hand) fails that open; R2
publishes the conversion (``deepseekv3_checkpoint_bf16_megatron_bridge``) and the plan mounts it. The rehearsal's probe
(tests/benchmarks/deepseekv3_671b/rehearsal.py) runs the reference's own ``create_config`` and checks the folder it names.
"""

from __future__ import annotations

import re

import pytest

from mlperf_wf.benchmarks.deepseekv3_671b import converted_checkpoint
from mlperf_wf.config import registry
from tests.rehearsal import cluster, spec

REHEARSAL = spec.module("deepseekv3_671b").REHEARSAL
PUBLISHED_NAMES = {
    "latest_checkpointed_iteration.txt",
    "latest_train_state.pt",
    *(
        f"iter_0000000/{name}"
        for name in (
            ".metadata",
            "common.pt",
            "metadata.json",
            "modelopt_run_config.yaml",
            "run_config.yaml",
            "run_config.yaml.bak",
            "train_state.pt",
            "tokenizer/special_tokens_map.json",
            "tokenizer/tokenizer.json",
            "tokenizer/tokenizer_config.json",
        )
    ),
}
"""R2's deepseekv3_checkpoint_bf16_megatron_bridge.md5 (r2-infra f27deeec): these 12 names and 512 shards
``iter_0000000/__<0..255>_<0..1>.distcp``."""
SHARD = re.compile(r"iter_0000000/__\d+_\d+\.distcp")


def _skip_reason() -> str | None:
    return cluster.missing_requirements() or (f"reference sources absent: {spec.missing_sources(REHEARSAL)}" if spec.missing_sources(REHEARSAL) else None)


def test_the_checkpoint_input_is_r2s_conversion_and_the_stand_in_has_its_names(tmp_path):
    bench = registry.load_benchmark("deepseekv3_671b")
    dataset = registry.load_dataset(bench.inputs["checkpoint"].dataset)
    assert dataset.id == "deepseekv3_checkpoint_bf16_megatron_bridge" and dataset.file_count == len(PUBLISHED_NAMES) + 512
    assert dataset.source.md5 == "https://training.mlcommons-storage.org/metadata/deepseekv3_checkpoint_bf16_megatron_bridge.md5"
    written = {str(p.relative_to(tmp_path)) for p in converted_checkpoint.generate(tmp_path, seed=dataset.tiny.seed)}
    shards = {name for name in written if SHARD.fullmatch(name)}
    assert written - shards == PUBLISHED_NAMES and shards == {"iter_0000000/__0_0.distcp"}


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_every_rank_opens_the_published_conversion_where_the_reference_loads_its_checkpoint(rehearsal_campaign):
    """Run 0 of the session's rehearsal campaign (every benchmark on the box)."""
    ran = rehearsal_campaign
    if REHEARSAL.benchmark not in ran.rehearsals:
        pytest.skip(f"{REHEARSAL.benchmark} is not rehearsed in this session")
    ranks = ran.ranks(REHEARSAL.benchmark, 0)
    problems = [f"rank {r['rank']} on {r['host']}: {r['problem'][-600:]}" for r in ranks if r["status"]]
    assert len(ranks) == REHEARSAL.nodes * REHEARSAL.gpus_per_node and not problems, "\n".join(problems) + ran.train_log(REHEARSAL.benchmark, 0)[-2000:]
    for record in ranks:
        opened = {check["what"]: check["held"] for check in record["checked"]}
        assert opened["/checkpoint/iter_0000000"] and opened["/checkpoint/iter_0000000/metadata.json"] and opened["/checkpoint/iter_0000000/.metadata"]
