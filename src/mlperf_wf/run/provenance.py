"""What a run was made with, written next to its log: ``provenance.json``.

Backend and image (with digest), host, accelerators (``nvidia-smi`` where there
is one), Python, and the run's campaign identity
(:class:`mlperf_wf.run.identity.CampaignIdentity`: the workflow's git commit and
its local changes, the benchmark's resolved config and hyperparameters, the digests
of what the run read, the image and the versions of the packages that shape a
result), which the report compares across the runs of a set.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from mlperf_wf.acquire.verify import hash_file
from mlperf_wf.errors import ConfigError, UserError

PACKAGES = ("mlperf-logging", "torch", "transformers", "peft", "accelerate", "tokenizers", "snakemake", "mlperf-workflow")


def _run(argv: list[str], cwd: Path | None = None) -> str | None:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def gpus() -> list[str]:
    """Accelerator names, from nvidia-smi when it exists (empty on a CPU host)."""
    if shutil.which("nvidia-smi") is None:
        return []
    listing = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    return [line.strip() for line in (listing or "").splitlines() if line.strip()]


def git_state(root: Path | None) -> dict:
    """Commit of the workflow checkout, whether it had uncommitted changes and their digest
    (:func:`mlperf_wf.run.identity.git_state`)."""
    from mlperf_wf.run import identity

    return identity.git_state(root)


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (the digest that chains a run log from its job to its score)."""
    return hash_file(path, {"sha256": hashlib.sha256()})["sha256"].hexdigest()


def consumed_digests(inputs: list[Path]) -> dict[str, str]:
    """sha256 of what a run read, by path: a file's bytes; for a folder, its stamps file beside it where it has one
    (a prepared tree: ``<tree>.stamps.json.gz``), else "folder" (a verified dataset: its record is among the inputs)."""
    digests = {}
    for path in inputs:
        stamps = path.with_name(f"{path.name}.stamps.json.gz")
        if path.is_file():
            digests[str(path)] = file_sha256(path)
        elif stamps.is_file():
            digests[str(path)] = f"stamps {file_sha256(stamps)}"
        else:
            digests[str(path)] = "folder"
    return digests


def collect(
    scale: str,
    launcher: str,
    image: str | None,
    command: str,
    root: Path | None,
    result: Path | None = None,
    consumed: list[Path] | None = None,
    config: dict | None = None,
) -> dict:
    """Everything the record holds (with ``result``: the sha256 of the run log the job wrote; with ``consumed``: the
    digests of what the run read; ``config``: the benchmark's resolved config, as the plan gave it to the job)."""
    from mlperf_wf.run import identity

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    made_with = identity.compute(config, root, identity.data_digests(consumed) if consumed else None, image, versions)
    return {
        "scale": scale,
        "launcher": launcher,
        "command": command,
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "gpus": gpus(),
        "python": sys.version.split()[0],
        **identity.provenance_fields(made_with),
        **({"result_sha256": file_sha256(result)} if result is not None else {}),
        **({"consumed": consumed_digests(consumed)} if consumed else {}),
    }


def write(out: Path, record: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")


def record_run(
    out: Path,
    scale: str,
    launcher: str,
    image: str | None,
    command: str,
    result: Path | None = None,
    consumed: list[Path] | None = None,
    node_checks: Path | None = None,
    config: str = "",
) -> None:
    """Write what a run was made with next to its log (and the digest of the log, which compliance and report check),
    with every attempt's node check where the run had one; ``config``: the benchmark's resolved config (JSON), as the
    plan gave it to the job (part of the run's campaign identity)."""
    from mlperf_wf.config.checkout import project_root
    from mlperf_wf.run import node_check

    try:
        resolved = json.loads(config) if config else None
    except ValueError as err:
        raise UserError(f"provenance: --config {config[:80]!r}: not JSON ({err}); give the object the plan makes") from None
    if resolved is not None and not isinstance(resolved, dict):
        raise UserError(f"provenance: --config {config[:80]!r}: a JSON object is expected")
    if result is not None and not result.is_file():
        raise UserError(f"provenance: --result {result}: no such file (the run wrote no log)")
    try:
        checkout = project_root()
    except ConfigError:
        checkout = None  # recorded as an unknown commit: a run is not failed for where the workflow was installed
    record = collect(scale, launcher, image or None, command, checkout, result, consumed, resolved)
    if node_checks is not None and str(node_checks) not in ("", "."):
        record["node_checks"] = node_check.attempts(node_checks)
    write(out, record)
