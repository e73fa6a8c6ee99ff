"""llama2_70b_lora: LoRA fine-tuning of Llama-2-70B on SCROLLS GovReport (see README.md)."""
