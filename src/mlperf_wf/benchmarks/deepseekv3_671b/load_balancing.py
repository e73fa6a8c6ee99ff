"""DeepSeek-V3's sequence-wise auxiliary load-balancing loss, from the routers' own outputs.

The reference trains with Megatron-Core's ``seq_aux_loss`` (the load-balancing type of DeepSeek-V3 in
Megatron's recipes) at ``moe_aux_loss_coeff = 0.01`` (pretrain_deepseek_v3_671b.py:155). transformers'
``DeepseekV3ForCausalLM`` routes with ``DeepseekV3TopkRouter`` (sigmoid scores, top-k) but computes no auxiliary
loss, so the tiny tier computes it here from what each router returns, (logits, top-k weights, top-k indices),
captured with forward hooks during the training forward pass:

    for each sequence of T tokens and each MoE layer, with N routed experts and K chosen per token,
    s'_{t,i} = sigmoid(logit_{t,i}) / sum_j sigmoid(logit_{t,j})      (normalised affinities)
    P_i = (1/T) sum_t s'_{t,i}                                         (mean affinity)
    f_i = N / (K T) * #{t : expert i in the top-k of token t}          (load, 1 when balanced)
    L = sum_i f_i P_i

averaged over the batch's sequences and summed over the MoE layers (DeepSeek-V3 report eq. 17-20; Megatron's
``sequence_load_balancing_loss_func``). The gradient flows through P (the router's weights); f is a count.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from mlperf_wf.language_models.causal_trainer import next_token_loss


def sequence_balance_loss(router_logits: torch.Tensor, topk_indices: torch.Tensor, batch: int, num_experts: int) -> torch.Tensor:
    """L of one MoE layer: ``router_logits`` [batch x tokens, N], ``topk_indices`` [batch x tokens, K] (row-major by sequence)."""
    tokens = router_logits.size(0) // batch
    top_k = topk_indices.size(-1)
    scores = torch.sigmoid(router_logits.float())
    affinity = (scores / scores.sum(dim=-1, keepdim=True)).view(batch, tokens, num_experts).mean(dim=1)
    chosen = torch.zeros_like(scores).scatter_(1, topk_indices, 1.0).view(batch, tokens, num_experts).sum(dim=1)
    load = chosen * num_experts / (top_k * tokens)
    return (load * affinity).sum(dim=-1).mean()


def moe_routers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's ``DeepseekV3TopkRouter`` modules (one per MoE layer)."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3TopkRouter

    return [module for module in model.modules() if isinstance(module, DeepseekV3TopkRouter)]


@contextmanager
def captured_routing(model: torch.nn.Module) -> Iterator[list[tuple[torch.Tensor, torch.Tensor, int, int]]]:
    """While open, each router call appends (logits, top-k indices, sequences in the batch, routed experts)."""
    routers = moe_routers(model)
    if not routers:
        raise ValueError(f"{type(model).__name__}: no DeepseekV3TopkRouter in the model, so there is no load-balancing loss to add")
    captured: list[tuple[torch.Tensor, torch.Tensor, int, int]] = []

    def record(module: torch.nn.Module, inputs: tuple, outputs: tuple) -> None:
        logits, _, indices = outputs
        captured.append((logits, indices, inputs[0].size(0), module.num_experts))

    handles = [router.register_forward_hook(record) for router in routers]
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def balance_loss(captured: list[tuple[torch.Tensor, torch.Tensor, int, int]]) -> torch.Tensor:
    """The sum over MoE layers of :func:`sequence_balance_loss`."""
    return torch.stack([sequence_balance_loss(logits, indices, batch, experts) for logits, indices, batch, experts in captured]).sum()


def training_loss_with_balance(coefficient: float):
    """The step's loss: next-token cross-entropy plus ``coefficient`` x the sequence-wise balance loss."""

    def training_loss(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
        with captured_routing(model) as captured:
            loss = next_token_loss(model, batch)
        return loss + coefficient * balance_loss(captured)

    return training_loss
