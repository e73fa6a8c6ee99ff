"""The retinanet benchmark's tests."""
