"""LAMB as the reference defines it (lamb_optimizer_v1.py), for torch.

Per parameter: Adam moments with bias correction, ``update = m_hat / (sqrt(v_hat) + eps)``, plus
``weight_decay_rate * w`` where weight decay applies; then the layer-wise trust ratio
``||w|| / ||update||`` (1 where either norm is 0, and where layer adaptation is excluded) scales
``lr * update``. Weight decay and layer adaptation both skip the parameters whose names hold
"LayerNorm", "layer_norm" or "bias" (optimization.py: ``exclude_from_weight_decay``; layer
adaptation follows it when not given). torch has no LAMB of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import torch

EXCLUDED_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
"""Name fragments of the parameters without weight decay or layer adaptation (the reference's list)."""


class Lamb(torch.optim.Optimizer):
    """LAMB over named parameters (names decide the exclusions)."""

    def __init__(
        self,
        named_parameters: Iterable[tuple[str, torch.nn.Parameter]],
        lr: float,
        beta_1: float,
        beta_2: float,
        epsilon: float,
        weight_decay_rate: float,
    ) -> None:
        decayed, excluded = [], []
        for name, parameter in named_parameters:
            if not parameter.requires_grad:
                continue
            (excluded if any(re.search(fragment, name) for fragment in EXCLUDED_FROM_WEIGHT_DECAY) else decayed).append(parameter)
        groups = [
            {"params": decayed, "weight_decay_rate": weight_decay_rate, "layer_adaptation": True},
            {"params": excluded, "weight_decay_rate": 0.0, "layer_adaptation": False},
        ]
        super().__init__(groups, {"lr": lr, "beta_1": beta_1, "beta_2": beta_2, "epsilon": epsilon})
        self.step_count = 0

    @torch.no_grad()
    def step(self, closure=None) -> None:
        self.step_count += 1
        for group in self.param_groups:
            beta_1, beta_2 = group["beta_1"], group["beta_2"]
            correction_1 = 1.0 - beta_1**self.step_count
            correction_2 = 1.0 - beta_2**self.step_count
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                state = self.state[parameter]
                if not state:
                    state["m"] = torch.zeros_like(parameter)
                    state["v"] = torch.zeros_like(parameter)
                m, v = state["m"], state["v"]
                m.mul_(beta_1).add_(parameter.grad, alpha=1 - beta_1)
                v.mul_(beta_2).addcmul_(parameter.grad, parameter.grad, value=1 - beta_2)
                update = (m / correction_1) / ((v / correction_2).sqrt() + group["epsilon"])
                if group["weight_decay_rate"]:
                    update.add_(parameter, alpha=group["weight_decay_rate"])
                ratio = 1.0
                if group["layer_adaptation"]:
                    w_norm, u_norm = parameter.norm().item(), update.norm().item()
                    if w_norm > 0 and u_norm > 0:
                        ratio = w_norm / u_norm
                parameter.add_(update, alpha=-ratio * group["lr"])
