"""The llama31_405b benchmark's tests."""
