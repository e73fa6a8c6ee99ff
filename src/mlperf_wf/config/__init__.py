"""What the workflow is told: the benchmark and dataset definitions, the workflow config, the rules from mlperf-logging."""
