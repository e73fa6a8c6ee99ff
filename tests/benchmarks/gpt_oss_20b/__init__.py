"""The gpt_oss_20b benchmark's tests."""
