"""The gpt3 benchmark's tests."""
