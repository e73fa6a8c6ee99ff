"""A run's nodes divided between two roles that never share a node (``full.geometry.node_split``).

qwen35_397b_grpo's reference trains the policy on 16 nodes and generates on 48 (``TRAIN_NODES``, ``GEN_NODES``): on
the user's node count the plan keeps that ratio, 1:3, and where the expert groups are placed in whole NVLink-domain
segments (``full.geometry.segment_nodes``) each role is whole segments, as NeMo-RL selects the training nodes segment
by segment. A node count that cannot split so is refused in one line naming the counts that can. A rehearsal
(``full_geometry.<name>.rehearsal``) launches the same command on fewer nodes than the ratio needs: each role then
gets at least one node (NeMo-RL refuses a role without nodes when the cluster has more than one), and the dry run
says the geometry is a rehearsal's.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlperf_wf.config.registry import NodeSplit
from mlperf_wf.errors import ConfigError


@dataclass(frozen=True)
class NodeRoles:
    """The nodes of each role on one run's geometry."""

    train: int
    """Nodes that train the policy."""
    generation: int
    """Nodes that generate (the inference engines)."""
    rehearsal: bool
    """Whether the split is a rehearsal's (each role at least one node), not the reference's ratio."""

    def in_words(self, split: NodeSplit) -> str:
        """One line for the dry run: the split, and whether it is the reference's ratio or a rehearsal's."""
        counts = f"{self.train} policy-training + {self.generation} generation nodes"
        if self.rehearsal:
            ratio = f"{split.train}:{split.generation}"
            return f"{counts}: a rehearsal geometry (full_geometry rehearsal: true), not the reference's {ratio}; its runs are not a submission's"
        return f"{counts}, the reference's {split.train}:{split.generation} ({split.source})"


def split_nodes(name: str, split: NodeSplit, nodes: int, segment_nodes: int | None, rehearsal: bool = False) -> NodeRoles:
    """The roles' nodes of a run of ``name`` on ``nodes`` nodes (``segment_nodes``: the NVLink segment the run is placed
    in, None where none is); ``ConfigError`` (one line) where they cannot split in the reference's ratio."""
    parts = split.train + split.generation
    unit = segment_nodes or 1
    if nodes % (parts * unit) == 0:
        share = nodes // parts
        return NodeRoles(train=share * split.train, generation=share * split.generation, rehearsal=False)
    if rehearsal and nodes >= 2 and segment_nodes is None:
        train = max(1, nodes * split.train // parts)
        return NodeRoles(train=train, generation=nodes - train, rehearsal=True)
    ratio = f"{split.train}:{split.generation}"
    whole = f" in whole {unit}-node NVLink segments (sbatch --segment={unit})" if segment_nodes else ""
    rehearse = "" if segment_nodes else f", or set full_geometry.{name}.rehearsal: true to rehearse the launch on {max(2, nodes)} nodes"
    raise ConfigError(
        f"{name}: {nodes} node{'s' if nodes > 1 else ''} cannot split {ratio} into policy-training and generation nodes{whole} (the reference's ratio, "
        f"full.geometry.node_split: {split.source}): set full_geometry.{name}.nodes to a multiple of {parts * unit}{rehearse}"
    )
