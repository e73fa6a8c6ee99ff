"""Inside a train job: power sampling, the reference in the loop, reference logs."""
