"""One module per catalog entry: its tiny generator (``generate(out_dir, seed)``), see ``tiny_data``."""
