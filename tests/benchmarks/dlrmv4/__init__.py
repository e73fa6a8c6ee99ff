"""The dlrmv4 benchmark's tests."""
