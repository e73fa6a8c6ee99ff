"""mlperf-workflow: MLPerf Training benchmarks end to end, as a Snakemake workflow."""

__version__ = "0.1.0"
