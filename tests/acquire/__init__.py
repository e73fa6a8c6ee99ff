"""Getting the data: downloads, verification, the tiny generators' data."""
