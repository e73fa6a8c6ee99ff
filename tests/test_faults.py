"""Faults a cluster and its users cause, on a tiny two-run llama2_70b_lora campaign: nothing wrong is scored,
nothing valid is lost, and each fault ends in one line naming the file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mlperf_wf import cli
from tests.test_workflow import new_workdir, snakemake

BENCH = "llama2_70b_lora"
CONFIG = ("--config", f"benchmarks=[{BENCH}]", "runs=2")


@pytest.fixture
def campaign(tmp_path_factory) -> Path:
    """A finished two-run campaign, made once and copied for each test (each one breaks its own copy)."""
    made = tmp_path_factory.getbasetemp() / "faults_campaign"
    if not (made / "results/tiny" / BENCH / "report.json").exists():
        new_workdir(made)
        snakemake(made, "--cores", "2", *CONFIG)
    copy = tmp_path_factory.mktemp("fault")
    shutil.copytree(made, copy, dirs_exist_ok=True, symlinks=True)
    # The copy's files are new inodes: recorded as they are now, as a train job does for a tree moved whole.
    cli.cmd_check_prepared(copy / "resources/tiny/prepared" / BENCH / "dataset")
    return copy


def run_folder(workdir: Path, run: int) -> Path:
    return workdir / "results/tiny" / BENCH / "runs" / str(run)


def replace_keeping_mtime(path: Path, text: str) -> None:
    stat = path.stat()
    path.write_text(text)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def one_line_error_in(log: Path, needle: str) -> str:
    text = log.read_text()
    lines = [line for line in text.splitlines() if needle in line]
    assert len(lines) == 1 and "Traceback" not in text, text[-3000:]
    return lines[0]


def logs_text(workdir: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in (workdir / "logs").rglob("*.log"))


@pytest.mark.slow
def test_another_runs_log_in_a_run_folder_fails_its_check_and_is_never_scored(campaign):
    """Fault 1: a log copied in from elsewhere (here another benchmark's, made from run 1's log) is checked as the
    run it sits in: its bytes are not what the run's job wrote, its benchmark and seed are another's."""
    score_before = json.loads((campaign / "results/tiny" / BENCH / "report.json").read_text())["score"]
    foreign = (run_folder(campaign, 1) / "result.txt").read_text().replace('"value": "llama2_70b_lora"', '"value": "flux1"')
    (run_folder(campaign, 0) / "result.txt").write_text(foreign)  # newer than its verdict: the check reruns
    proc = snakemake(campaign, "--cores", "2", *CONFIG, check_rc=False)
    assert proc.returncode != 0
    logged = logs_text(campaign)
    assert "the log is not the one its train job wrote" in logged
    assert "submission_benchmark 'flux1', this run's is 'llama2_70b_lora'" in logged and "seed 1235, this run's is 1234" in logged
    verdict = json.loads((run_folder(campaign, 0) / "compliance.json").read_text()) if (run_folder(campaign, 0) / "compliance.json").exists() else None
    assert verdict is None or verdict["verdict"] == "failed"
    report = json.loads((campaign / "results/tiny" / BENCH / "report.json").read_text())
    assert report["score"] == score_before  # the report was not rebuilt from the foreign log


@pytest.mark.slow
def test_a_log_edited_after_its_check_is_refused_by_the_report(campaign):
    """Fault 4: run_stop moved 30 s earlier, mtime restored: nothing reruns the check, and the report (rebuilt)
    refuses the log in one line naming it instead of scoring the edited time."""
    result = run_folder(campaign, 0) / "result.txt"
    lines = result.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if '"key": "run_stop"' in line:
            record = json.loads(line.split(":::MLLOG ", 1)[1])
            record["time_ms"] -= 30_000
            lines[i] = line.split(":::MLLOG ", 1)[0] + ":::MLLOG " + json.dumps(record) + "\n"
    replace_keeping_mtime(result, "".join(lines))
    (campaign / "results/tiny" / BENCH / "report.json").unlink()
    proc = snakemake(campaign, "--cores", "2", *CONFIG, check_rc=False)
    assert proc.returncode != 0
    assert "logs/tiny/report/llama2_70b_lora.log" in proc.stderr  # Snakemake names the job's log, which holds the line
    line = one_line_error_in(campaign / "logs/tiny/report/llama2_70b_lora.log", "not the log its compliance check read")
    assert str(Path("results/tiny") / BENCH / "runs/0/result.txt") in line and "compliance.json" in line
    assert not (campaign / "results/tiny" / BENCH / "report.json").exists()
    # Checked again, the edited log fails (its bytes are not the ones its job wrote); redone, the run is scored.
    (run_folder(campaign, 0) / "compliance.json").unlink()
    proc = snakemake(campaign, "--cores", "2", *CONFIG, check_rc=False)
    assert proc.returncode != 0 and "the log is not the one its train job wrote" in logs_text(campaign)
    shutil.rmtree(run_folder(campaign, 0))
    snakemake(campaign, "--cores", "2", *CONFIG)
    report = json.loads((campaign / "results/tiny" / BENCH / "report.json").read_text())
    assert {run["compliance"] for run in report["runs"]} == {"passed"}


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (root)")
def test_a_full_disk_during_training_fails_the_run_and_the_rerun_after_freeing_space_completes(campaign):
    """Fault 2: the run folder fills up (a 4 KiB tmpfs) while the trainer logs: the job fails with the write error
    in one line (logging no longer swallows it), no cut-off result.txt is left as finished, and once space is
    freed the same command redoes the run."""
    folder = run_folder(campaign, 0)
    shutil.rmtree(folder)
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(folder)], check=True)
    try:
        proc = snakemake(campaign, "--cores", "2", *CONFIG, check_rc=False)
        assert proc.returncode != 0
        line = one_line_error_in(campaign / "logs/tiny/train" / BENCH / "0.log", "writing the run's log failed")
        assert "No space left on device" in line and "result.txt" in line
        assert not (folder / "result.txt").exists()  # Snakemake removed the failed job's output
    finally:
        subprocess.run(["umount", str(folder)], check=True)
    snakemake(campaign, "--cores", "2", *CONFIG)
    report = json.loads((campaign / "results/tiny" / BENCH / "report.json").read_text())
    assert {run["compliance"] for run in report["runs"]} == {"passed"}


def flip_a_byte_keeping_mtime(path: Path, offset: int = 100) -> None:
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    with path.open("r+b") as handle:  # in place: the same inode, as a bit rot or a stray write
        handle.write(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_byte_flipped_in_a_verified_file_is_seen_through_its_prepared_hard_link(tmp_path):
    """Fault 3, the mechanism: a prepared file that is a hard link of a verified dataset file shares its inode; a
    byte flipped through the verified name (mtime set back) changes the inode's ctime, which the prepared tree's
    stamps (recorded after linking) catch, naming the file; stat only, nothing re-hashed."""
    from mlperf_wf.errors import UserError
    from mlperf_wf.prepare import assemble, link_or_copy

    verified = tmp_path / "datasets" / "ds" / "train.bin"
    verified.parent.mkdir(parents=True)
    verified.write_bytes(os.urandom(4096))
    shards = tmp_path / "prepared" / "shards"
    (shards / "copy").mkdir(parents=True)
    link_or_copy(verified, shards / "copy" / "train.bin")
    assert (shards / "copy" / "train.bin").stat().st_ino == verified.stat().st_ino
    tree = tmp_path / "prepared" / "dataset"
    assemble({"train.bin": "copy/train.bin"}, shards, tree)
    cli.cmd_check_prepared(tree)  # as assembled: passes
    flip_a_byte_keeping_mtime(verified)
    with pytest.raises(UserError) as refused:
        cli.cmd_check_prepared(tree)
    message = str(refused.value)
    assert "\n" not in message and f"{tree}/train.bin: ctime changed since it was prepared" in message
    assert "resources/<scale>/verified/<dataset>.json" in message


@pytest.mark.slow
def test_a_prepared_file_changed_after_preparation_stops_the_redone_run_before_it_trains(campaign):
    """Fault 3 in the workflow: a byte flipped in a prepared file with its mtime set back reruns nothing; a redone
    run (its folder deleted) refuses to start, in one line in its log naming the file; the finished run is kept."""
    prepared = campaign / "resources/tiny/prepared" / BENCH / "dataset"
    flip_a_byte_keeping_mtime((prepared / "validation-00000-of-00001.parquet").resolve(), offset=200)
    kept = (run_folder(campaign, 1) / "result.txt").read_bytes()
    shutil.rmtree(run_folder(campaign, 0))
    proc = snakemake(campaign, "--cores", "2", *CONFIG, check_rc=False)
    assert proc.returncode != 0
    line = one_line_error_in(campaign / "logs/tiny/train" / BENCH / "0.log", "since it was prepared")
    assert "validation-00000-of-00001.parquet: ctime changed" in line
    assert (run_folder(campaign, 1) / "result.txt").read_bytes() == kept
