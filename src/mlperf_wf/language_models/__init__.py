"""What the tiny tiers of the language-model benchmarks share: the Markov corpus written in the Megatron
indexed-dataset format, its symbol tokenizer in the Hugging Face format, and the dense causal-LM trainer."""
