"""Style gates CI enforces: snakemake --lint, snakefmt and ruff stay clean, and the package's layers import downward only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, check=False)


def test_snakemake_lint_is_clean():
    proc = run(str(BIN / "snakemake"), "--lint")
    assert proc.returncode == 0 and "Congratulations" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_snakefmt_is_clean():
    proc = run(str(BIN / "snakefmt"), "--check", "workflow")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_is_clean():
    for argv in (("check", "src", "tests", "bench", "containers"), ("format", "--check", "src", "tests", "bench", "containers")):
        proc = run(str(BIN / "ruff"), *argv)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_contracts_hold():
    """``lint-imports`` (pyproject's ``[tool.importlinter]``): each layer of ``mlperf_wf`` imports only the layers below
    it, and no benchmark folder imports another."""
    proc = run(str(BIN / "lint-imports"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout, proc.stdout


def _rule_blocks() -> dict[str, str]:
    blocks = {}
    for path in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        for block in path.read_text().split("\nrule ")[1:]:
            name, _, body = block.partition(":")
            blocks[name.strip()] = body.split("\n\n\n")[0]
    return blocks


KEYED_OTHERWISE = {"download": {"scale"}}
"""Cached rules' wildcards another param already tells apart: a download's ``source`` holds the scale's own URIs (the
tiny mirror's ``file:`` paths, or the published ones). Making them params now would move existing cache entries."""


def test_every_cached_rule_keys_its_jobs_by_their_wildcards():
    """Snakemake's output cache keys a job by its params and its unformatted shell line, not its wildcards: a cached
    rule that names a wildcard only in its shell line (``{wildcards.dataset}``) gives every job one cache entry, and a
    second dataset is "restored" with the first one's files. Each wildcard of a cached rule's output is a param."""
    import re

    cached = {name: body for name, body in _rule_blocks().items() if "\n    cache:" in body}
    assert {"generate_tiny_mirror", "download", "preprocess_shard"} <= set(cached), sorted(cached)
    for name, body in cached.items():
        output = body.split("\n    output:", 1)[1].split("\n    log:", 1)[0]
        wildcards = set(re.findall(r"(?<!\{)\{([a-z_]+)\}(?!\})", output))
        params = body.split("\n    params:", 1)[1].split("\n    shell:", 1)[0] if "\n    params:" in body else ""
        missing = sorted(w for w in wildcards - KEYED_OTHERWISE.get(name, set()) if f'{w}="{{{w}}}"' not in params)
        assert wildcards and not missing, f"rule {name}: output wildcards {missing} are not params"
