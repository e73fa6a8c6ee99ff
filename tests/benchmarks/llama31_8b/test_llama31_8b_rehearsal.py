"""llama31_8b on one node of the cluster in a box: the reference's data stage past start-up, for real.

``build_data_index`` builds megatron-core's GPTDataset sample index (BlendedMegatronDatasetBuilder, the C++ helpers)
of the prepared tiny datasets into ``/npy_index`` (a scratch mount: the data mount is read-only), and every training
rank builds its datasets from that index and reads a sample of each split (tests/rehearsal/llama31.py).
"""

from __future__ import annotations

import pytest

from tests.rehearsal import campaign, cluster, spec
from tests.rehearsal import llama31 as _llama31

REHEARSAL = spec.module("llama31_8b").REHEARSAL


def _skip_reason() -> str | None:
    return cluster.missing_requirements() or (f"reference sources absent: {spec.missing_sources(REHEARSAL)}" if spec.missing_sources(REHEARSAL) else None)


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))


@pytest.fixture(scope="module")
def ran(rehearsal_campaign) -> campaign.Campaign:
    """Run 0 of the session's rehearsal campaign (every benchmark on the box)."""
    if REHEARSAL.benchmark not in rehearsal_campaign.rehearsals:
        pytest.skip(f"{REHEARSAL.benchmark} is not rehearsed in this session")
    return rehearsal_campaign


def test_megatron_core_builds_the_index_and_every_rank_reads_through_it(ran):
    records = ran.records(REHEARSAL.benchmark, 0)
    problems = _llama31.data_stage_problems(records, REHEARSAL.nodes * REHEARSAL.gpus_per_node)
    assert not problems, "\n".join(problems) + ran.train_log(REHEARSAL.benchmark, 0)[-3000:]


def test_the_data_stage_imports_the_megatron_core_of_the_reference_s_image(request):
    """Dockerfile.h200 replaces the base image's megatron-core with core_r0.11.0: the rehearsal's image puts megatron-core
    0.11.0 (``make test`` installs it into .venv-reference) before the project venv's on PYTHONPATH, and every process
    of the data stage (build_data_index, each training rank) records the one it imported. It is not patched (no
    ``mcore.patch`` in small_llm_pretraining): megatron-core shuffles every split, the validation split too."""
    from tests.benchmarks.llama31_8b import rehearsal as llama31_8b

    folder = _llama31.require_megatron_core(llama31_8b.MEGATRON_CORE)
    ran = request.getfixturevalue("ran")
    records = ran.records(REHEARSAL.benchmark, 0)
    problems = _llama31.megatron_core_problems(records, folder, llama31_8b.MEGATRON_CORE)
    assert not problems, "\n".join(problems)
    orders = _llama31.sample_orders(records)  # unpatched, as the reference's: every split shuffled
    assert all(orders.get(split, "").startswith("shuffled") for split in ("train", "valid", "test")), orders
