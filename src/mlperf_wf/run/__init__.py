"""What runs inside a train job: the tiny trainers' harness, the run folder, provenance, power sampling, logging."""
