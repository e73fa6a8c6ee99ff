"""The rgat benchmark's tests."""
