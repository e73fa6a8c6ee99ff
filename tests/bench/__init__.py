"""The measuring scripts of bench/: they measure what they say they measure."""
