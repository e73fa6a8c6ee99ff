"""The deepseekv3_671b benchmark's tests."""
