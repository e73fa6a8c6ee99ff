"""The llama31_8b benchmark's tests."""
