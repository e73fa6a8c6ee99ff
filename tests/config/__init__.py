"""Definitions and config: the benchmark contract, the catalog, the config model, the import graph."""
