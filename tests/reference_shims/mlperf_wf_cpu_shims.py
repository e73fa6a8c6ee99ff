"""Test-only stand-ins that let the GPU reference run on this CPU machine (never in an image).

Loaded through ``MLPERF_WF_HOOKS`` after the benchmark's real patches, by the
reference-in-the-loop tests only (``tests/run/test_reference_in_the_loop.py``):

- ``attn_implementation="flash_attention_2"`` (hard-coded in the reference's ``utils.py``) becomes
  ``"sdpa"``: flash-attn has no CPU build. Same model, same log.
- transformers 4.38 builds a ``max_position_embeddings``² (8192²) causal mask and repeats it on every
  forward; starting it at 1024 (it doubles when a batch is longer) keeps the values and turns a
  15-minute CPU run into seconds. On a GPU flash attention never builds it.
"""

from __future__ import annotations

from types import ModuleType

from sitecustomize import after_import

INITIAL_MASK_LENGTH = 1024


def _sdpa_instead_of_flash_attention(module: ModuleType) -> None:
    auto = module.AutoModelForCausalLM
    original = auto.from_pretrained.__func__

    def from_pretrained(cls: type, *args: object, **kwargs: object) -> object:
        if kwargs.get("attn_implementation") == "flash_attention_2":
            kwargs["attn_implementation"] = "sdpa"
        return original(cls, *args, **kwargs)

    auto.from_pretrained = classmethod(from_pretrained)


def _short_mask_cache(module: ModuleType) -> None:
    import torch

    model_class = module.LlamaModel
    original_init = model_class.__init__

    def __init__(self: object, config: object) -> None:
        original_init(self, config)
        if hasattr(self, "causal_mask"):
            length = min(INITIAL_MASK_LENGTH, self.causal_mask.shape[-1])
            mask = torch.triu(torch.full((length, length), fill_value=1), diagonal=1)
            self.register_buffer("causal_mask", mask, persistent=False)

    model_class.__init__ = __init__


after_import("transformers.models.auto.modeling_auto", _sdpa_instead_of_flash_attention)
after_import("transformers.models.llama.modeling_llama", _short_mask_cache)
