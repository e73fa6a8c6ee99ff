"""The rehearsal probe's own records (tests/rehearsal/probe.py): a rank ended mid-write leaves no half record."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rehearsal import probe


def test_a_rank_ended_while_writing_its_record_leaves_no_half_written_record(tmp_path, monkeypatch):
    """When one rank fails, its launcher ends the others at any moment; the campaign reads every ``*.json`` record (a
    full run once failed on an empty one)."""
    monkeypatch.setenv(probe.RECORDS_VARIABLE, str(tmp_path))
    monkeypatch.setenv("SEED", "1235")
    written = Path.write_text

    def killed_mid_write(self, text, *args, **kwargs):
        written(self, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt("the process ends here")

    monkeypatch.setattr(Path, "write_text", killed_mid_write)
    with pytest.raises(KeyboardInterrupt):
        probe._write("rank-3.json", {"rank": 3, "status": 0})
    monkeypatch.setattr(Path, "write_text", written)
    assert list((tmp_path / "seed-1235").glob("*.json")) == []
    probe._write("rank-3.json", {"rank": 3, "status": 0})
    assert [path.name for path in (tmp_path / "seed-1235").glob("*.json")] == ["rank-3.json"]


REFERENCE = """\
import os, shutil
from pathlib import Path
root = Path(os.environ["ROOT"])
(root / "results" / "log.txt").write_text("run")  # line 4
with open(root / "data" / "index.idx", "wb") as stream:  # line 5
    stream.write(b"cache beside the data")
(root / "data" / "read.txt").read_text()
os.makedirs(root / "results" / "checkpoints", exist_ok=True)
os.replace(root / "results" / "log.txt", root / "elsewhere.txt")  # line 9
"""

AUDITED = """\
import json, os, runpy, sys
sys.path.insert(0, os.environ["PROJECT"])
from tests.rehearsal import probe
probe.audit_writes((os.environ["ROOT"] + "/reference/",), os.environ["ROOT"] + "/records")
runpy.run_path(os.environ["ROOT"] + "/reference/train.py")
print(json.dumps(probe._writes))
"""


def _audited_writes(tmp_path: Path) -> dict[str, str]:
    """What the probe's audit records of a reference script run under it (in a process of its own: an audit hook
    stays for the life of its process)."""
    import json
    import os
    import subprocess
    import sys

    for folder in ("reference", "results", "data", "records"):
        (tmp_path / folder).mkdir()
    (tmp_path / "data" / "read.txt").write_text("input")
    (tmp_path / "reference" / "train.py").write_text(REFERENCE)
    env = {**os.environ, "ROOT": str(tmp_path), "PROJECT": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", AUDITED], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_the_audit_records_each_file_the_reference_writes_with_the_line_that_wrote_it(tmp_path):
    writes = _audited_writes(tmp_path)
    train = f"{tmp_path}/reference/train.py"
    assert writes == {
        f"{tmp_path}/results/log.txt": f"{train}:4",
        f"{tmp_path}/data/index.idx": f"{train}:5",
        f"{tmp_path}/results/checkpoints": f"{train}:8",
        f"{tmp_path}/elsewhere.txt": f"{train}:9",
    }, writes


def test_a_write_outside_what_the_plan_declares_writable_fails_naming_the_file_and_the_line(tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "_writes", _audited_writes(tmp_path))
    ctx = probe.ProbeContext(benchmark="b", argv=[], env={}, cwd=tmp_path)
    plan = {"mounts": [[f"{tmp_path}/data", "ro"], [f"{tmp_path}/results", "rw"]], "container_writable": False}
    with pytest.raises(probe.ProbeFailure) as failed:
        probe.check_writes(ctx, plan)
    train = f"{tmp_path}/reference/train.py"
    assert str(failed.value) == (
        "the reference wrote outside what the plan declares writable: "
        f"{tmp_path}/data/index.idx (written by {train}:5); "
        f"{tmp_path}/elsewhere.txt (written by {train}:9 (in the container's own filesystem))"
    )
    # a container whose own filesystem the line makes writable takes the write outside every mount; a read-only mount
    # refuses it whatever the container's
    ctx = probe.ProbeContext(benchmark="b", argv=[], env={}, cwd=tmp_path)
    with pytest.raises(probe.ProbeFailure, match=r"wrote outside .*: \S+/data/index.idx \(written by \S+train.py:5\)$"):
        probe.check_writes(ctx, {**plan, "container_writable": True})


def test_a_mount_the_plan_declares_read_only_that_takes_a_new_file_fails_the_rank_naming_it(tmp_path):
    """On the box the stand-in and docker make the mount read-only; here the folder is writable, as a launcher that
    dropped ``:ro`` would leave it."""
    (tmp_path / "data").mkdir()
    ctx = probe.ProbeContext(benchmark="b", argv=[], env={}, cwd=tmp_path)
    with pytest.raises(probe.ProbeFailure, match=rf"the plan mounts {tmp_path}/data read-only, but this rank on \S+ could write"):
        probe.check_read_only_mounts(ctx, {"mounts": [[f"{tmp_path}/data", "ro"]], "container_writable": True})
    assert list((tmp_path / "data").iterdir()) == [], "the probe's file is gone"


@pytest.mark.parametrize("launcher", ["pyxis", "docker"])
def test_the_plan_facts_the_probe_checks_are_the_job_line_s_mounts_and_modes(launcher):
    """``campaign.plan_facts`` reads what the golden plan's full-scale line of a benchmark declares: its prepared data
    read-only, its results and scratch area read-write, and a writable container filesystem."""
    import json

    from tests.rehearsal import campaign

    command = json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "gpt3" / "golden" / "gpt3.json").read_text())["full"][
        f"run_3/{launcher}/1_node"
    ]["command"]
    facts = campaign.plan_facts(command)
    assert facts["container_writable"] is True
    assert ["/data", "ro"] in facts["mounts"] and ["/results", "rw"] in facts["mounts"] and ["/index_maps", "rw"] in facts["mounts"], facts
