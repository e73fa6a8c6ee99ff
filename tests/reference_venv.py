"""The reference implementations' own packages, in ``.venv-reference`` (``make .venv-reference/bin/activate``): where a
test runs a real component against the rehearsal's stand-in for it (the contract tests in ``tests/workflow``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_PYTHON = ROOT / ".venv-reference" / "bin" / "python"


def reference_python_with(module: str, what: str, required: bool = True, how: str = "") -> Path:
    """``.venv-reference``'s Python where ``module`` imports there; otherwise the test skips, or fails under
    ``MLPERF_WF_REQUIRE_REFERENCE`` (``make test``) where it is ``required``. ``what``: the component, in the message;
    ``how``: what else installing it needs."""
    found = subprocess.run([str(REFERENCE_PYTHON), "-c", f"import {module}"], capture_output=True) if REFERENCE_PYTHON.exists() else None
    if found is None or found.returncode != 0:
        message = f"{what} is not installed in {REFERENCE_PYTHON.parent.parent}: make .venv-reference/bin/activate{how}"
        if os.environ.get("MLPERF_WF_REQUIRE_REFERENCE") and required:
            pytest.fail(message)
        pytest.skip(message)
    return REFERENCE_PYTHON
