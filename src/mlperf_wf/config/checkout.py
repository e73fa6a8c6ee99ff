"""Where the workflow checkout is (``workflow/``, ``containers/``, ``config/``), for the commands that read it.

Found, in this order: ``MLPERF_WF_PROJECT``; the first folder at or above the current one that holds
``workflow/Snakefile`` (a campaign run in its checkout, the Snakemake layout); the source tree the package was
installed from in editable mode (its PEP 610 ``direct_url.json``: a campaign whose working directory is elsewhere,
``snakemake -s CHECKOUT/workflow/Snakefile -d SCRATCH``). Never a path relative to this file, which a regular install
moves into site-packages.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import unquote, urlparse

from mlperf_wf.errors import ConfigError

DISTRIBUTION = "mlperf-workflow"
ENVIRONMENT = "MLPERF_WF_PROJECT"
MARKER = Path("workflow") / "Snakefile"


def _editable_source() -> Path | None:
    """The folder an editable install was made from, read from each installed copy's ``direct_url.json`` (a source
    tree on ``PYTHONPATH`` may show its own ``egg-info`` first, which has none)."""
    from importlib import metadata  # a few hundredths of a second: only where the checkout is looked for

    for distribution in metadata.distributions(name=DISTRIBUTION):
        record = distribution.read_text("direct_url.json")
        url = json.loads(record) if record else {}
        if url.get("dir_info", {}).get("editable") and url.get("url", "").startswith("file://"):
            return Path(unquote(urlparse(url["url"]).path))
    return None


def project_root(start: Path | None = None) -> Path:
    """The checkout the workflow runs from (see the module docstring), or one line saying how to name it."""
    named = os.environ.get(ENVIRONMENT)
    if named:
        if not (Path(named) / MARKER).is_file():
            raise ConfigError(f"{ENVIRONMENT}={named}: no {MARKER} there; give the folder of the workflow's checkout")
        return Path(named)
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / MARKER).is_file():
            return folder
    source = _editable_source()
    if source is not None and (source / MARKER).is_file():
        return source
    raise ConfigError(f"no {MARKER} in {here} or above it: run in the workflow's checkout, or set {ENVIRONMENT} to it")
