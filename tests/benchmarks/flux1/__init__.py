"""The flux1 benchmark's tests."""
