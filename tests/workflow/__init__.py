"""The workflow end to end: tiny campaigns, faults, the CLI, the engines (SLURM, Docker, the cluster in a box), lint, docs."""
