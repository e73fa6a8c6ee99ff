"""Faults a cluster and its users cause, on a tiny two-run llama2_70b_lora campaign: nothing wrong is scored,
nothing valid is lost, and each fault ends in one line naming the file."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlperf_wf import cli
from mlperf_wf.acquire import prepare
from mlperf_wf.results import package as submission_package
from tests.results.test_status import live_snakemake
from tests.workflow.test_workflow import new_workdir, snakemake, snakemake_argv, snakemake_env

BENCH = "llama2_70b_lora"
CONFIG = ("--config", f"benchmarks=[{BENCH}]", "runs=2")
SECRETS = {
    "MLPERF_WF_CF_ACCESS_CLIENT_ID": "cf-id-7f3a9e.access",
    "MLPERF_WF_CF_ACCESS_CLIENT_SECRET": "cf-secret-52d1c08b",
    "MLPERF_WF_CF_ACCESS_TOKEN": "cf-token-e91a44",
    "HF_TOKEN": "hf_token_0b6c2d",
}
"""Set for the campaign the fault tests share; no output of it may hold one."""


@pytest.fixture
def campaign(tmp_path_factory, tiny_mirrors) -> Path:
    """A finished two-run campaign, made once and copied for each test (each one breaks its own copy)."""
    made = tmp_path_factory.getbasetemp() / "faults_campaign"
    if not (made / "results/tiny" / BENCH / "report.json").exists():
        tiny_mirrors.seed(new_workdir(made), BENCH)
        with pytest.MonkeyPatch.context() as env:  # credentials in the environment, as on a cluster
            for variable, secret in SECRETS.items():
                env.setenv(variable, secret)
            snakemake(made, "--cores", "2", *CONFIG)
    copy = tmp_path_factory.mktemp("fault")
    shutil.copytree(made, copy, dirs_exist_ok=True, symlinks=True)
    # The copy's files are new inodes: recorded as they are now, as a train job does for a tree moved whole.
    prepare.check_prepared(copy / "resources/tiny/prepared" / BENCH / "dataset")
    return copy


@pytest.mark.slow
def test_credentials_appear_in_no_log_report_provenance_or_printed_command(campaign):
    """The campaign ran with every credential in its environment: not one byte of them is in what it wrote (logs,
    results, reports, provenance, Snakemake's own records)."""
    leaked = []
    for path in campaign.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            leaked += [f"{path.relative_to(campaign)}: {name}" for name, secret in SECRETS.items() if secret.encode() in data]
    assert not leaked, leaked


@pytest.mark.slow
def test_each_stage_records_the_digests_of_what_it_read_and_wrote(campaign):
    """The chain of custody: a run's provenance holds the digests of the verified records and the prepared tree's
    stamps it read and of the log it wrote; its verdict, the digest of the log it checked; the report, of the log it
    scored; all the same log."""
    report = json.loads((campaign / "results/tiny" / BENCH / "report.json").read_text())
    for entry in report["runs"]:
        folder = run_folder(campaign, entry["index"])
        record = json.loads((folder / "provenance.json").read_text())
        verdict = json.loads((folder / "compliance.json").read_text())
        assert record["result_sha256"] == verdict["sha256"] == entry["result_sha256"] != ""
        consumed = record["consumed"]
        assert consumed[f"resources/tiny/prepared/{BENCH}/dataset"].startswith("stamps ")
        assert len(consumed["resources/tiny/verified/llama2_70b_fused_qkv.json"]) == 64


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


def readers_on(workdir: Path, run: int) -> dict[str, str]:
    """What `mlperf-wf status` and `mlperf-wf score` say of one run of the campaign (their line for it)."""
    shown = subprocess.run([*MLPERF_WF, "status", "--config", f"benchmarks=[{BENCH}]", "runs=2"], capture_output=True, text=True, cwd=workdir)
    scored = subprocess.run([*MLPERF_WF, "score", f"results/tiny/{BENCH}", "--ruleset", "6.1.0"], capture_output=True, text=True, cwd=workdir)
    assert "Traceback" not in shown.stderr + scored.stderr, shown.stderr + scored.stderr
    status_line = next(line.strip() for line in shown.stdout.splitlines() if line.strip().startswith(f"run {run}:"))
    score_line = next((line.strip() for line in scored.stdout.splitlines() if line.strip().startswith(f"run {run} (")), "")
    return {"status": status_line, "score": score_line, "score_all": scored.stdout}


@pytest.mark.slow
def test_a_run_that_stops_before_it_starts_is_refused_by_the_workflow_status_and_score(campaign):
    """run_stop moved before run_start and the provenance updated to match: the compliance job refuses the log in one
    line; status and score say refused, naming the file; nothing is timed negative."""
    result = run_folder(campaign, 0) / "result.txt"
    lines = result.read_text().splitlines(keepends=True)
    start = next(json.loads(line.split(":::MLLOG ", 1)[1])["time_ms"] for line in lines if '"key": "run_start"' in line)
    for i, line in enumerate(lines):
        if '"key": "run_stop"' in line:
            record = json.loads(line.split(":::MLLOG ", 1)[1])
            record["time_ms"] = start - 30_000
            lines[i] = line.split(":::MLLOG ", 1)[0] + ":::MLLOG " + json.dumps(record) + "\n"
    result.write_text("".join(lines))
    provenance = run_folder(campaign, 0) / "provenance.json"
    record = json.loads(provenance.read_text())
    record["result_sha256"] = hashlib.sha256(result.read_bytes()).hexdigest()
    provenance.write_text(json.dumps(record, indent=2) + "\n")
    proc = snakemake(campaign, "--cores", "2", *CONFIG, check_rc=False)
    assert proc.returncode != 0
    line = one_line_error_in(campaign / "logs/tiny/check_compliance" / BENCH / "0.log", "before run_start")
    assert str(Path("results/tiny") / BENCH / "runs/0/result.txt") in line and "30.000 s before run_start" in line
    said = readers_on(campaign, 0)
    assert said["status"].startswith("run 0: refused: ") and "before run_start" in said["status"], said
    assert said["score"].startswith("run 0 (runs/0/result.txt): refused: ") and "before run_start" in said["score"], said
    assert "-0." not in said["score_all"]


def identity_verdicts(workdir: Path, overrides: list[str], run: int) -> tuple[list[str], list[str], list[str]]:
    """Run ``run``'s problems as the report, ``mlperf-wf score`` on the folder and ``mlperf-wf status`` give them."""
    from mlperf_wf.results import scoring, status, verdict

    folder = workdir / "results/tiny" / BENCH
    report = json.loads((folder / "report.json").read_text())
    entry = report["runs"][run]
    assert (entry["compliance"], entry["verdict"]) == ("failed", "refused") and report["valid_submission"] is False
    (scored,) = scoring.score_paths(folder, report["ruleset"], verdict.judged_score, jobs=1)
    by_file = {Path(r.file).resolve(): r for r in scored.runs}
    score_run = by_file[(workdir / entry["result_file"]).resolve()]
    assert score_run.verdict == "failed" and not scored.valid
    shown = status.campaign_status(workdir, status.load_config(workdir, overrides), runs_given=True).benchmarks[0].runs[run]
    assert shown.state == "refused"
    return entry["identity_problems"], score_run.problems, shown.problems


@pytest.mark.slow
def test_a_run_folder_copied_from_a_campaign_with_other_hyperparameters_is_refused_by_name(campaign):
    """A run folder copied in from a campaign made with another learning rate (its provenance says so): the workflow
    remakes the report, which refuses the run naming the field and both values; score and status say the same."""
    made_with = run_folder(campaign, 0) / "provenance.json"
    record = json.loads(made_with.read_text())
    record["config"]["hyperparameters"]["learning_rate"] = 0.0002
    made_with.write_text(json.dumps(record, indent=2))
    snakemake(campaign, "--cores", "2", "--rerun-triggers", "mtime", *CONFIG)
    line = (
        f"results/tiny/{BENCH}/runs/0/provenance.json: config.hyperparameters.learning_rate 0.0002, the campaign's is 0.0004 "
        f"(results/tiny/{BENCH}/identity.json)"
    )
    in_report, in_score, in_status = identity_verdicts(campaign, ["runs=2", f"benchmarks=[{BENCH}]"], 0)
    assert in_report == [line] and in_status[0] == line
    assert in_score[0].replace(f"{campaign}/", "") == line  # score names the files under the folder it was given


@pytest.mark.slow
def test_changed_hyperparameters_and_one_run_redone_under_mtime_triggers_never_score_old_runs_with_the_new(campaign):
    """The learning rate changed, one run's folder deleted and the workflow rerun with ``--rerun-triggers mtime`` (what
    the profiles set): only that run is retrained, and the report refuses the run made with the old learning rate."""
    changed = (*CONFIG, f"tiny_hyperparameters={{{BENCH}: {{learning_rate: 0.0005}}}}")
    shutil.rmtree(run_folder(campaign, 1))
    proc = snakemake(campaign, "--cores", "2", "--rerun-triggers", "mtime", *changed)
    assert f"results/tiny/{BENCH}/identity.json: {BENCH}'s config changed" in proc.stderr
    made_with = json.loads((run_folder(campaign, 1) / "provenance.json").read_text())
    assert made_with["config"]["hyperparameters"]["learning_rate"] == 0.0005
    overrides = ["runs=2", f"benchmarks=[{BENCH}]", f"tiny_hyperparameters={{{BENCH}: {{learning_rate: 0.0005}}}}"]
    in_report, _, in_status = identity_verdicts(campaign, overrides, 0)
    line = f"results/tiny/{BENCH}/runs/0/provenance.json: config.hyperparameters.learning_rate 0.0004, the campaign's is 0.0005"
    assert in_report[0].startswith(line) and in_status[0] == in_report[0]
    report = json.loads((campaign / "results/tiny" / BENCH / "report.json").read_text())
    assert report["runs"][1]["identity_problems"] == []
    assert 0 not in report["score"]["counted_runs"]


@pytest.mark.slow
def test_changed_hyperparameters_alone_make_the_report_refuse_every_run_under_mtime_triggers(campaign):
    """The learning rate changed and nothing else: no run is retrained (mtime triggers), and the report is made
    again and refuses both runs by name, never left scoring them as the campaign it no longer is."""
    changed = (*CONFIG, f"tiny_hyperparameters={{{BENCH}: {{learning_rate: 0.0005}}}}")
    identity = (campaign / "results/tiny" / BENCH / "identity.json").read_bytes()
    dry = snakemake(campaign, "-n", "--rerun-triggers", "mtime", *changed)
    assert "would record it again" in dry.stderr and "recording it again" not in dry.stderr
    assert (campaign / "results/tiny" / BENCH / "identity.json").read_bytes() == identity, "a dry run writes no identity"
    proc = snakemake(campaign, "--cores", "2", "--rerun-triggers", "mtime", *changed)
    assert f"results/tiny/{BENCH}/identity.json: {BENCH}'s config changed" in proc.stderr
    assert "Nothing to be done" not in proc.stdout + proc.stderr
    report = json.loads((campaign / "results/tiny" / BENCH / "report.json").read_text())
    assert all(run["identity_problems"] for run in report["runs"]) and not report["valid_submission"]
    assert report["score"]["counted_runs"] == []


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
    from mlperf_wf.acquire.prepare import assemble, link_or_copy, record_shard
    from mlperf_wf.errors import UserError

    verified = tmp_path / "datasets" / "ds" / "train.bin"
    verified.parent.mkdir(parents=True)
    verified.write_bytes(os.urandom(4096))
    shards = tmp_path / "prepared" / "shards"
    (shards / "copy").mkdir(parents=True)
    link_or_copy(verified, shards / "copy" / "train.bin")
    assert (shards / "copy" / "train.bin").stat().st_ino == verified.stat().st_ino
    record_shard(shards / "copy")
    tree = tmp_path / "prepared" / "dataset"
    assemble({"train.bin": "copy/train.bin"}, shards, tree)
    prepare.check_prepared(tree)  # as assembled: passes
    os.link(verified, tmp_path / "another_benchmarks_link.bin")  # another preparation links it too: ctime moves
    prepare.check_prepared(tree)  # passes (the link count changed with the ctime) and renews the stamps
    flip_a_byte_keeping_mtime(verified)
    with pytest.raises(UserError) as refused:
        prepare.check_prepared(tree)
    message = str(refused.value)
    assert "\n" not in message and f"{tree}/train.bin: ctime changed since it was prepared" in message
    assert "resources/<scale>/verified/<dataset>.json" in message and "hard link" in message


def test_a_prepared_file_changed_since_preparation_is_refused_with_advice_that_works(tmp_path):
    """A shard's own file (not a link of a downloaded one) changed in place: the refusal names the file and says what
    re-prepares it; doing what it says refuses the shard by name at assembly and moves it aside to be made again
    (deleting the verification records, what it said before, changed nothing: the downloads are intact)."""
    from mlperf_wf.acquire.prepare import assemble, record_shard
    from mlperf_wf.errors import ChecksumError, UserError

    shards = tmp_path / "resources/tiny/prepared/bench/shards"
    (shards / "tokens").mkdir(parents=True)
    (shards / "tokens/train.bin").write_bytes(os.urandom(4096))
    record_shard(shards / "tokens")
    tree = shards.parent / "dataset"
    assemble({"train.bin": "tokens/train.bin"}, shards, tree)
    flip_a_byte_keeping_mtime(shards / "tokens/train.bin")
    with pytest.raises(UserError) as refused:
        prepare.check_prepared(tree)
    message = str(refused.value)
    assert "\n" not in message and f"{tree}/train.bin: ctime changed since it was prepared" in message, message
    assert f"delete {tree} and rerun" in message and "verified" not in message, message
    shutil.rmtree(tree)  # what it says
    with pytest.raises(ChecksumError, match=r"tokens/train\.bin: md5 mismatch: .*rerun and it is made again"):
        assemble({"train.bin": "tokens/train.bin"}, shards, tree)
    assert not (shards / "tokens").exists(), "the changed shard is set aside, so the rerun makes it again"


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


# ---- bad input: one line, never a traceback ----

ROOT = Path(__file__).resolve().parents[2]
MLPERF_WF = [sys.executable, "-m", "mlperf_wf"]


def one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The only error line of a failed command (no traceback), which holds every needle."""
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and len(errors) == 1, proc.stderr[-2000:]
    assert all(needle in errors[0] for needle in needles), errors[0]
    return errors[0]


def r2_folder(tmp_path: Path, uri: bytes, md5: bytes | None = None) -> str:
    (tmp_path / "m/metadata").mkdir(parents=True)
    (tmp_path / "m/data/ds").mkdir(parents=True)
    (tmp_path / "m/data/ds/a.bin").write_bytes(b"x" * 10000)
    (tmp_path / "m/metadata/ds.uri").write_bytes(uri)
    (tmp_path / "m/metadata/ds.md5").write_bytes(md5 if md5 is not None else b"a57da8f1e6ad35ded8e4ae1ebe7abeab  a.bin\n")
    return (tmp_path / "m/metadata/ds.uri").as_uri()


@pytest.mark.parametrize(
    ("uri", "md5", "needles"),
    [
        (b"", None, ("ds.uri: holds nothing, not a base URL",)),
        (b"garbage here\n", None, ("ds.uri: holds 'garbage here', not a base URL",)),
        (None, bytes(range(128, 256)), ("ds.md5: not text",)),
    ],
    ids=["empty uri", "garbage uri", "binary md5"],
)
def test_a_broken_r2_listing_is_one_line(tmp_path, uri, md5, needles):
    url = r2_folder(tmp_path, uri if uri is not None else (tmp_path / "m/data/ds").as_uri().encode(), md5)
    proc = subprocess.run([*MLPERF_WF, "download", "--uri", url, "--dest", str(tmp_path / "out")], capture_output=True, text=True)
    one_line(proc, *needles)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (root)")
def test_a_full_disk_during_download_is_one_line_and_keeps_what_arrived(tmp_path):
    url = r2_folder(tmp_path, (tmp_path / "m/data/ds").as_uri().encode())
    (tmp_path / "m/data/ds/a.bin").write_bytes(os.urandom(64 * 1024))
    (tmp_path / "m/metadata/ds.md5").write_text(f"{__import__('hashlib').md5((tmp_path / 'm/data/ds/a.bin').read_bytes()).hexdigest()}  a.bin\n")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)], check=True)
    try:
        proc = subprocess.run([*MLPERF_WF, "download", "--uri", url, "--dest", str(disk / "ds"), "--jobs", "1"], capture_output=True, text=True)
        one_line(proc, "No space left on device", "free space")
        assert any(disk.rglob("a.bin.part")), "the bytes that arrived are kept for the rerun"
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--root", "/no/such/folder", "status"], ("--root /no/such/folder: no such folder",)),
        (["status", "--watch", "-5"], ("--watch", "above 0")),
        (["status", "--config", "runs=three"], ("config.runs: 'three' is not allowed",)),
        (["status", "--config", "rnus=3"], ("config: unknown key 'rnus'; allowed keys:", "runs")),
    ],
    ids=["missing root", "negative watch", "runs not a number", "misspelled key"],
)
def test_bad_status_input_is_one_line(tmp_path, argv, needles):
    new_workdir(tmp_path / "w")
    proc = subprocess.run([*MLPERF_WF, *argv], capture_output=True, text=True, cwd=tmp_path / "w")
    one_line(proc, *needles)


def test_status_into_a_closed_pipe_is_quiet(tmp_path):
    new_workdir(tmp_path / "w")
    proc = subprocess.run(f"{sys.executable} -m mlperf_wf status | head -c 1", shell=True, capture_output=True, text=True, cwd=tmp_path / "w")
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ("--config rnus=3", "config: unknown key 'rnus'"),
        ("yaml", "config/config.yaml:"),
        ("tab", "it is a tab: indent with spaces"),
        ('--config submission={"platform":"nosuch"}', "submission.platform 'nosuch' has no system description config/systems/nosuch.yaml"),
    ],
    ids=["misspelled key", "malformed yaml", "tab in yaml", "platform with no system description, found before any job runs"],
)
def test_a_bad_workflow_config_is_one_line_not_the_whole_config(tmp_path, edit, needle):
    workdir = new_workdir(tmp_path / "w")
    args = ["-n"]
    if edit == "yaml":
        with (workdir / "config/config.yaml").open("a") as handle:
            handle.write("runs: [\n")
    elif edit == "tab":
        with (workdir / "config/config.yaml").open("a") as handle:
            handle.write("submission:\n\tdivision: closed\n")
    else:
        args += edit.split()
    proc = snakemake(workdir, *args, check_rc=False)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and needle in said
    assert len(said.splitlines()) < 15, said  # Snakemake's validate printed the whole config (hundreds of lines)


def test_status_tells_a_stale_lock_from_a_live_one(tmp_path):
    """After kill -9 the lock files stay: with no Snakemake working in the folder, status says not running and how to
    unlock, instead of a campaign running for ever more minutes."""
    from mlperf_wf.results import snakemake_state

    workdir = new_workdir(tmp_path / "w")
    locks = workdir / ".snakemake/locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text(f"{workdir}/results/tiny/llama2_70b_lora/runs/0/result.txt\n")
    records = snakemake_state.read_snakemake_records(workdir)
    assert records.stale_lock and not records.locked
    proc = subprocess.run([*MLPERF_WF, "status"], capture_output=True, text=True, cwd=workdir)
    assert "not running (a killed Snakemake left its lock: run `snakemake --unlock`" in proc.stdout
    # A process that is not a Snakemake does not count; one that is, working in the folder, keeps the lock live.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "snakemake", "-d", str(workdir)])
    try:
        assert snakemake_state.snakemake_running_in(workdir) is False
    finally:
        sleeper.kill()
    with live_snakemake(workdir):
        assert snakemake_state.read_snakemake_records(workdir).locked


# ---- kill -9 at every stage, then the documented rerun ----

STAGES = ("download", "verify", "preprocess", "train", "check_compliance", "report")
"""The stages killed in turn (each the moment its first job's log appears), in the order a campaign reaches them."""


def kill_when_started(workdir: Path, stage: str, timeout: float = 600) -> subprocess.CompletedProcess | None:
    """Run the campaign in its own session and kill -9 all of it when a ``stage`` job starts; None when it finished
    first (a stage already done is not reached again)."""
    before = set((workdir / "logs/tiny" / stage).rglob("*.log")) if (workdir / "logs/tiny" / stage).is_dir() else set()
    with subprocess.Popen(snakemake_argv(workdir, "--cores", "2", "--rerun-incomplete", *CONFIG), env=snakemake_env(), start_new_session=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:  # fmt: skip
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            logs = set((workdir / "logs/tiny" / stage).rglob("*.log")) if (workdir / "logs/tiny" / stage).is_dir() else set()
            if logs - before:
                os.killpg(proc.pid, 9)
                proc.wait()
                return proc
            time.sleep(0.05)
        return None


@pytest.mark.slow
def test_kill_9_at_every_stage_then_the_documented_rerun_completes_and_keeps_what_was_done(tmp_path, tiny_mirrors):
    """kill -9 of Snakemake and its jobs as each stage starts (download, verify, a preparation shard, a run, a
    compliance check, the report); after each, the README's rerun (`snakemake --unlock`, then the same command with
    --rerun-incomplete) goes on. Finished runs are never redone, and the end is a report of passed runs."""
    workdir = tiny_mirrors.seed(new_workdir(tmp_path / "w"), BENCH)
    killed = []
    for stage in STAGES:
        finished_runs = {p: p.stat().st_mtime_ns for p in (workdir / "results/tiny" / BENCH / "runs").glob("*/compliance.json")}
        if kill_when_started(workdir, stage) is not None:
            killed.append(stage)
        snakemake(workdir, "--unlock", *CONFIG)
        for verdict, mtime in finished_runs.items():  # a checked run is kept as it was
            assert verdict.stat().st_mtime_ns == mtime, verdict
    assert killed[:3] == ["download", "verify", "preprocess"] and "train" in killed, killed
    snakemake(workdir, "--cores", "2", "--rerun-incomplete", *CONFIG)
    report = json.loads((workdir / "results/tiny" / BENCH / "report.json").read_text())
    assert len(report["runs"]) == 2 and {run["compliance"] for run in report["runs"]} == {"passed"}


@pytest.mark.slow
def test_a_second_identical_invocation_during_a_campaign_is_one_line_and_the_first_goes_on(tmp_path, tiny_mirrors):
    """The same command typed again while the campaign runs is refused in one line naming the running Snakemake
    (it failed on the first one's unfinished outputs with IncompleteFilesException); the first finishes."""
    workdir = tiny_mirrors.seed(new_workdir(tmp_path / "w"), BENCH)
    argv = snakemake_argv(workdir, "--cores", "2", *CONFIG)
    with subprocess.Popen(argv, env=snakemake_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as first:
        deadline = time.monotonic() + 600
        while not any((workdir / "logs/tiny/train").rglob("*.log")) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        second = snakemake(workdir, "--cores", "2", *CONFIG, check_rc=False)
        said = second.stdout + second.stderr
        assert second.returncode != 0 and f"another Snakemake (pid {first.pid}) is running in {workdir}" in said, said[-3000:]
        assert "IncompleteFilesException" not in said
        assert first.wait(timeout=900) == 0
    report = json.loads((workdir / "results/tiny" / BENCH / "report.json").read_text())
    assert {run["compliance"] for run in report["runs"]} == {"passed"}


@pytest.mark.slow
def test_a_package_file_changed_or_its_system_description_edited_is_packaged_again(campaign):
    """The package check holds for the files it checked: a package file edited by hand, or the system description the
    package was made from edited, makes the next invocation package (and check) again instead of 'Nothing to be done'."""
    submission = campaign / "results/tiny/submission/6.1.0-closed"
    result = next((submission / "package").rglob("result_0.txt"))
    result.write_text(result.read_text() + "edited by hand\n")
    dry = snakemake(campaign, "-n", *CONFIG)
    assert "would package again" in dry.stderr and "edited by hand" in result.read_text(), "a dry run changes nothing"
    proc = snakemake(campaign, "--cores", "2", *CONFIG)
    assert "changed since the package check (package_check.json) was made: packaging again" in proc.stderr
    assert "edited by hand" not in result.read_text()
    assert submission.joinpath("package_check.json").is_file() and submission_package.changed_since_checked(submission / "package_check.json") is None
    system = campaign / "config/systems/cpu-tiny.yaml"
    system.write_text(system.read_text().replace("system_name:", "system_name: Renamed #", 1))
    snakemake(campaign, "--cores", "2", *CONFIG)
    described = json.loads(next((submission / "package").rglob("systems/cpu-tiny.json")).read_text())
    assert described["system_name"].startswith("Renamed")


@pytest.mark.parametrize("disk", ["write refused", "small tmpfs"])
def test_a_full_disk_during_preparation_names_the_file_the_folder_and_what_to_do(tmp_path, monkeypatch, capsys, disk):
    """A shard job whose disk fills up: one line naming the file it was writing, the shard folder, the space left and
    what to do (write(2)'s error names no file, so the generic handler said "a file")."""
    import errno

    from mlperf_wf.benchmarks.llama2_70b_lora import prepare as llama_prepare

    out = tmp_path / "prepared/llama2_70b_lora/shards/govreport"
    if disk == "small tmpfs":
        out.mkdir(parents=True)
        if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(out)], capture_output=True).returncode:
            pytest.skip("mounting a small tmpfs needs root")

    def fills_the_disk(shard, inputs, out_dir, scale):
        out_dir.mkdir(parents=True, exist_ok=True)
        with (out_dir / "train-00000-of-00001.parquet").open("wb", buffering=0) as handle:
            for _ in range(64):
                handle.write(b"x" * 4096)
            if disk == "write refused":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as write(2) reports it: no file name

    monkeypatch.setattr(llama_prepare, "prepare_shard", fills_the_disk)
    try:
        status = cli.main(["preprocess", "--benchmark", BENCH, "--scale", "tiny", "--shard", "govreport", "--out", str(out)])
    finally:
        if disk == "small tmpfs":
            subprocess.run(["umount", str(out)], check=True)
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert status != 0 and len(errors) == 1, errors
    line = errors[0]
    assert f"{out}/train-00000-of-00001.parquet: No space left on device" in line, line
    assert f"shard govreport of {BENCH} in {out}" in line and "free space" in line and "rerun" in line, line


@pytest.mark.slow
def test_a_downloaded_file_written_after_verify_is_refused_by_the_preparation_that_would_read_it(campaign):
    """A downloaded file written after its verification (the campaign's record unchanged, so verify is not redone):
    the preparation made again checks the dataset against verify's stamps first and refuses the file by name, with
    its md5s, before anything reads it; the finished runs are kept."""
    record = json.loads((campaign / "resources/tiny/verified/scrolls_gov_report_8k.json").read_text())
    dataset = campaign / "resources/tiny/datasets/scrolls_gov_report_8k"
    changed = dataset / max(record["files"], key=lambda item: item["size"])["path"]
    data = bytearray(changed.read_bytes())
    data[200] ^= 0xFF
    changed.write_bytes(bytes(data))  # in place, as an editor or a stray write: a new mtime
    kept = (run_folder(campaign, 1) / "result.txt").read_bytes()
    shutil.rmtree(campaign / "resources/tiny/prepared" / BENCH)
    shutil.rmtree(run_folder(campaign, 0))
    proc = snakemake(campaign, "--cores", "2", *CONFIG, check_rc=False)
    assert proc.returncode != 0
    logs = sorted((campaign / "logs/tiny/preprocess" / BENCH).glob("*.log"))
    line = next((one_line_error_in(log, "md5 mismatch") for log in logs if "md5 mismatch" in log.read_text()), None)
    assert line and f"{changed.relative_to(dataset.parent)}: md5 mismatch (written after it was verified)" in line, [log.read_text()[-600:] for log in logs]
    assert not (campaign / "resources/tiny/prepared" / BENCH / "dataset").exists()
    assert (run_folder(campaign, 1) / "result.txt").read_bytes() == kept
