"""YAML reading with libyaml's C loader where PyYAML was built with it: every Snakemake parse reads about 80
definition files and the round's rule files, and the pure-Python loader takes ten times as long. Both loaders
raise the same ``yaml.MarkedYAMLError`` with a line and column."""

from __future__ import annotations

import yaml

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> object:
    """``yaml.safe_load``, with the C loader when there is one."""
    return yaml.load(text, Loader=SAFE_LOADER)
