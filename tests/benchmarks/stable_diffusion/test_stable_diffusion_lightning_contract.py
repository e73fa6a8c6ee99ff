"""stable_diffusion's srun world, the real Lightning Trainer and the rehearsal's stand-in (``_check_geometry``): the same
world accepted or refused, under the scenarios of tests/workflow/test_lightning_contract.py (which says how)."""

from __future__ import annotations

from tests.benchmarks.stable_diffusion import rehearsal as stable_diffusion
from tests.workflow.test_lightning_contract import SLURM_SCENARIOS, _compare, _real, _stand_in


def test_stable_diffusion_s_srun_world_is_refused_where_lightning_refuses_it(monkeypatch):
    real = _real(SLURM_SCENARIOS)
    stand_in = {}
    for name, (devices, nodes, env) in SLURM_SCENARIOS.items():
        config = {"lightning": {"trainer": {"devices": devices, "num_nodes": nodes}}}
        stand_in[name] = _stand_in(lambda ctx, config=config: stable_diffusion._check_geometry(ctx, config), env, monkeypatch)
    _compare(real, stand_in)
    assert real["the-plan-s-geometry"] == "accepted: SLURMEnvironment world 4", real
    assert sum(verdict.startswith("refused") for verdict in real.values()) == len(real) - 1, real
