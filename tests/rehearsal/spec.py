"""What a benchmark's rehearsal needs (tests only): one :class:`Rehearsal` per ``tests/benchmarks/<name>/rehearsal.py``.

A benchmark's module defines ``REHEARSAL`` (below), ``published(dataset_id, folder)`` (writes one dataset of the
benchmark in its published layout, tiny contents) and ``probe(ctx)`` (runs in the reference's entry process inside
the rehearsed job: see ``tests/rehearsal/probe.py``).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_SOURCES = Path(os.environ.get("MLPERF_WF_REFERENCE_SRC", ROOT.parent / "shared" / "reference-src"))
"""Unmodified excerpts of the references at their pinned commits (``../shared/reference-src``)."""


@dataclass(frozen=True)
class Rehearsal:
    """How a benchmark's full-scale job is rehearsed on the cluster in a box."""

    benchmark: str
    image_files: dict[str, str]
    """Container path -> folder of ``REFERENCE_SOURCES`` (``<tree>/<path>``): where the benchmark's Dockerfile puts the
    reference's files (its ``RUN git clone ... && cp -r`` lines), e.g. ``{"/workspace/ft-llm":
    "mlcommons-training-aa344c7/llama2_70b_lora"}``. The Dockerfile's own ``COPY`` and ``ENV`` lines are read from it."""
    entry: tuple[str, ...]
    """The reference's entry scripts as the full-scale command names them (relative to the workdir or absolute):
    the processes the probe takes over."""
    nodes: int
    """Nodes of the rehearsed run: 2 where the reference runs on several nodes, else 1."""
    gpus_per_node: int = 2
    """GPUs per node of the rehearsed run (a rank each: small, so the box's two cores can start them all)."""
    launchers: tuple[str, ...] = ("pyxis",)
    """Launchers rehearsed (``docker`` runs on one node)."""
    image_env: dict[str, str] = field(default_factory=dict)
    """``ENV`` of the real image that the Dockerfile's base image sets and the reference relies on."""
    one_world: bool = True
    """The reference's processes form one world of a rank per GPU (a launcher's, or its own spawn). False where they do
    not (bert: one TensorFlow process drives every GPU of the node, and its evaluation is a second process): the
    benchmark's probe then checks the geometry the reference uses, and the generic test only every process's end."""
    arguments: dict[str, str] = field(default_factory=dict)
    """``full_arguments`` of the rehearsed run (only where the box needs them; each is named in the benchmark's README)."""
    image_build: tuple[str, ...] = ()
    """``RUN`` lines of the benchmark's Dockerfile (each verbatim) that build part of the image from the reference's own
    files, run in the rehearsal image's layer at its ``WORKDIR`` with this machine's toolchain, e.g. gpt3's
    ``make -C megatron/data`` (the C++ dataset helper)."""
    image_tools: dict[str, str] = field(default_factory=dict)
    """Container path -> folder of this project (relative to its root, e.g. ``tests/benchmarks/<name>/rehearsal_image/bin``):
    the box's stand-ins for programs of the real image that cannot run here (a GPU-less ``nvidia-smi``, ``uv run``
    without a synced environment), copied into the image after ``image_files``; each is named in the benchmark's README."""


def module(benchmark: str) -> ModuleType:
    return importlib.import_module(f"tests.benchmarks.{benchmark}.rehearsal")


MODULE_FILE = "rehearsal.py"
"""A benchmark's rehearsal module, beside its tests (``tests/benchmarks/<name>/rehearsal.py``); its stand-ins for the
image's software, where it needs any, are in ``rehearsal_image/`` there."""

ONLY_VARIABLE = "MLPERF_WF_REHEARSE"
"""Comma-separated benchmarks to rehearse (default: all), for a developer's quicker run."""


def rehearsals() -> dict[str, Rehearsal]:
    """Every benchmark that has a rehearsal module (or those of ``$MLPERF_WF_REHEARSE``)."""
    only = set(filter(None, os.environ.get(ONLY_VARIABLE, "").split(",")))
    found = {}
    for path in sorted((ROOT / "tests" / "benchmarks").glob(f"*/{MODULE_FILE}")):
        name = path.parent.name
        if only and name not in only:
            continue
        found[name] = module(name).REHEARSAL
    return found


def missing_sources(rehearsal: Rehearsal) -> list[str]:
    return [source for source in rehearsal.image_files.values() if not (REFERENCE_SOURCES / source).exists()]
