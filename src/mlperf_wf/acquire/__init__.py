"""Getting the data: downloads from R2 and the Hugging Face Hub, verification, the tiny mirror, preparation shards."""
