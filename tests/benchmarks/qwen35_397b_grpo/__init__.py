"""The qwen35_397b_grpo benchmark's tests."""
