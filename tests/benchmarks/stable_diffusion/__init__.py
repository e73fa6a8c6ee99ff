"""The stable_diffusion benchmark's tests."""
