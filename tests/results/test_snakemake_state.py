"""The adapter that reads Snakemake's private state (``mlperf_wf.results.snakemake_state``), checked against Snakemake itself:
its own encoder of incomplete markers, and the records a real Snakemake leaves while a job runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from snakemake.persistence.file import FilePersistence

from mlperf_wf.results import snakemake_state


def _snakemake_marker(folder: Path, output: str) -> Path:
    """Where Snakemake's own code puts the incomplete marker of ``output`` (its ``_record_path``, unbound)."""
    persistence = FilePersistence.__new__(FilePersistence)
    persistence._max_len = None
    return Path(FilePersistence._record_path(persistence, str(folder), output))


def test_markers_decode_as_snakemake_encodes_them_short_and_split(tmp_path):
    incomplete = tmp_path / ".snakemake/incomplete"
    incomplete.mkdir(parents=True)
    outputs = ["results/tiny/rgat/runs/0/result.txt", "resources/" + "very_long_folder_name/" * 30 + "shard"]
    for job_id, output in enumerate(outputs):
        marker = _snakemake_marker(incomplete, output)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"external_jobid": job_id or None}))
    assert len(_snakemake_marker(incomplete, outputs[1]).relative_to(incomplete).parts) > 1, "the long one is split"
    (incomplete / "migration_underway").write_text("")  # Snakemake's flag, not a marker
    records = snakemake_state.read_snakemake_records(tmp_path)
    assert records.started == {outputs[0]: None, outputs[1]: "1"}
    assert not records.locked and records.wanted == frozenset()


def test_a_real_snakemake_s_lock_and_marker_are_read_while_its_job_runs(tmp_path):
    (tmp_path / "Snakefile").write_text('rule slow:\n    output: "out/done.txt"\n    shell: "sleep 20 && touch {output}"\n')
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--quiet"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        records = snakemake_state.read_snakemake_records(tmp_path)
        while "out/done.txt" not in records.started and time.monotonic() < deadline:
            time.sleep(0.5)
            records = snakemake_state.read_snakemake_records(tmp_path)
        assert records.locked and "out/done.txt" in records.wanted and records.started == {"out/done.txt": None}
        assert snakemake_state.snakemake_running_in(tmp_path) is True
        assert snakemake_state.another_snakemake_in(tmp_path) == proc.pid
    finally:
        proc.kill()
        proc.wait()
    after = snakemake_state.read_snakemake_records(tmp_path)
    assert after.stale_lock and not after.locked, "killed with -9: its lock stays, and no Snakemake works here"


def test_the_jobs_a_running_snakemake_reported_failed_are_read_from_its_log(tmp_path):
    (tmp_path / "Snakefile").write_text(
        'rule all:\n    input: "out/bad.txt", "out/slow.txt"\n'
        'rule bad:\n    output: "out/bad.txt", "out/bad.json"\n    shell: "exit 3"\n'
        'rule slow:\n    output: "out/slow.txt"\n    shell: "sleep 20 && touch {output}"\n'
    )
    argv = [sys.executable, "-m", "snakemake", "--cores", "2", "--keep-going"]  # --quiet logs no failed job
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        records = snakemake_state.read_snakemake_records(tmp_path)
        # both start at once, but on a busy machine `bad` may fail before `slow`'s marker is written
        while not (records.failed and "out/slow.txt" in records.started) and time.monotonic() < deadline:
            time.sleep(0.5)
            records = snakemake_state.read_snakemake_records(tmp_path)
        assert records.locked and records.failed == {"out/bad.txt", "out/bad.json"}
        assert "out/slow.txt" in records.started and "out/slow.txt" not in records.failed
    finally:
        proc.kill()
        proc.wait()
