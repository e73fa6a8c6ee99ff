"""The bert benchmark's tests."""
