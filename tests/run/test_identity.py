"""One campaign, one identity: a set is scored only when the same code, config, data, image and packages made every run.

Each fault is a run folder of a finished ten-run set changed the way a user or a copy does it; the report (as the
workflow makes it, with the set's ``identity.json``) and ``mlperf-wf score`` on the folder give the same verdict: the run
is refused by name, the field that differs and both values said, and the set is not valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlperf_wf.cli import main
from mlperf_wf.run import identity
from tests.results.test_compliance_and_report import make_runs

MINUTES = [20.0, 21.0, 19.0, 25.0, 22.0, 18.0, 23.0, 24.0, 20.5, 21.5]
CONFIG = {"benchmark": "llama2_70b_lora", "scale": "full", "ruleset": "6.1.0", "division": "closed", "hyperparameters": {"learning_rate": 0.0004}}
OTHER_CONFIG = {**CONFIG, "hyperparameters": {"learning_rate": 0.0002}}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A finished ten-run set in a workflow's ``results/full/llama2_70b_lora``: logs, verdicts, provenance (recorded by
    ``mlperf-wf provenance`` with the config the plan gives) and the set's ``identity.json``; copied for each test."""
    folder = tmp_path_factory.mktemp("identity") / "results/full/llama2_70b_lora"
    args = make_runs(folder, MINUTES)
    for i in range(len(MINUTES)):
        run = folder / "runs" / str(i)
        record = ["provenance", "--out", str(run / "provenance.json"), "--scale", "full", "--launcher", "local"]
        assert main([*record, "--result", str(run / "result.txt"), "--config", json.dumps(CONFIG)]) == 0
    expected = identity.CampaignIdentity(config=CONFIG)
    assert main(["identity", "--json", expected.model_dump_json(), "--out", str(folder / "identity.json")]) == 0
    (folder / "args.json").write_text(json.dumps(args))
    return folder


@pytest.fixture
def folder(made, tmp_path) -> Path:
    import shutil

    copy = tmp_path / "results/full/llama2_70b_lora"
    shutil.copytree(made, copy)
    args = [a.replace(str(made), str(copy)) for a in json.loads((copy / "args.json").read_text())]
    (copy / "args.json").write_text(json.dumps(args))
    return copy


def provenance_of(folder: Path, run: int) -> Path:
    return folder / "runs" / str(run) / "provenance.json"


def edit_provenance(folder: Path, run: int, change) -> None:
    path = provenance_of(folder, run)
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record, indent=2))


def report_of(folder: Path) -> dict:
    """The report as the workflow's rule makes it: every run's log, verdict and provenance, and the set's identity."""
    args = json.loads((folder / "args.json").read_text())
    for i in range(len(MINUTES)):
        args += ["--provenance", str(provenance_of(folder, i))]
    out = folder / "report.json"
    command = ["report", "--benchmark", "llama2_70b_lora", "--ruleset", "6.1.0", "--division", "closed", "--scale", "full", "--platform", "p"]
    assert main([*command, *args, "--identity", str(folder / "identity.json"), "--out", str(out)]) == 0
    return json.loads(out.read_text())


def score_of(folder: Path, tmp_path: Path) -> dict:
    out = tmp_path / "score.json"
    main(["score", str(folder), "--ruleset", "6.1.0", "--json", str(out), "--jobs", "1"])
    (score,) = json.loads(out.read_text())
    return score


def assert_refused(folder: Path, tmp_path: Path, runs: list[int], needle: str) -> None:
    """The report and ``score`` refuse exactly ``runs``, each with a line naming its provenance and ``needle``, and
    neither gives the set a valid score."""
    report = report_of(folder)
    score = score_of(folder, tmp_path)
    refused = {entry["index"]: entry["identity_problems"] for entry in report["runs"] if entry["identity_problems"]}
    assert sorted(refused) == runs, refused
    for run in runs:
        line = next(line for line in refused[run] if needle in line)
        assert line.startswith(f"{provenance_of(folder, run)}: "), line
        entry = report["runs"][run]
        assert entry["compliance"] == "failed" and entry["minutes"] is None
        scored = next(r for r in score["runs"] if r["file"] == entry["result_file"])
        assert scored["verdict"] == "failed" and line in scored["problems"]
    assert report["valid_submission"] is False and score["valid"] is False
    reason = next(r for r in report["valid_submission_reasons"] if "another campaign identity" in r)
    assert reason in score["reasons"]
    assert all(str(folder / "runs" / str(run)) in reason for run in runs)


def test_a_set_made_with_one_identity_is_scored(folder, tmp_path):
    report = report_of(folder)
    assert report["valid_submission"] is True, report["valid_submission_reasons"]
    assert not any(entry["identity_problems"] for entry in report["runs"])
    assert score_of(folder, tmp_path)["valid"] is True


def test_a_run_folder_copied_from_a_campaign_with_other_hyperparameters_is_refused(folder, tmp_path):
    """A run folder copied in from a campaign made with other ``tiny_hyperparameters``: its provenance records them."""
    edit_provenance(folder, 3, lambda record: record.update(config=OTHER_CONFIG))
    assert_refused(folder, tmp_path, [3], "config.hyperparameters.learning_rate 0.0002, the campaign's is 0.0004")


def test_changed_hyperparameters_and_one_run_redone_never_scores_the_old_runs_with_the_new(folder, tmp_path):
    """The config changed (``identity.json`` made again) and one run redone with it, as ``--rerun-triggers mtime``
    does: the nine runs made with the old hyperparameters are refused, not scored with the new one."""
    identity.write_expected(identity.CampaignIdentity(config=OTHER_CONFIG), folder / "identity.json")
    edit_provenance(folder, 9, lambda record: record.update(config=OTHER_CONFIG))
    assert_refused(folder, tmp_path, list(range(9)), "config.hyperparameters.learning_rate 0.0004, the campaign's is 0.0002")
    assert report_of(folder)["score"]["time_to_train_minutes"] is None


def _set(keys: tuple[str, ...], value):
    def change(record: dict) -> None:
        target = record
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        target[keys[-1]] = value

    return change


@pytest.mark.parametrize(
    ("keys", "value", "needle"),
    [
        (("workflow_git", "commit"), "0" * 40, f'workflow_git.commit "{"0" * 40}", the set\'s is'),
        (("workflow_git", "local_changes"), "e" * 64, f'workflow_git.local_changes "{"e" * 64}", the set\'s is'),
        (("packages", "torch"), "2.12.0", 'packages.torch "2.12.0", the set\'s is "2.13.0'),
        (("packages", "mlperf-logging"), "4.1.0", 'packages.mlperf-logging "4.1.0", the set\'s is "4.1.68"'),
        (("image",), "reg/llama@sha256:" + "a" * 64, 'image "reg/llama@sha256:'),
        (("data",), {"resources/full/prepared/llama2_70b_lora/dataset": "tree " + "b" * 64}, "data[resources/full/prepared"),
    ],
    ids=["commit", "tree", "torch", "mlperf-logging", "image", "data"],
)
def test_a_run_made_by_other_code_packages_image_or_data_is_refused_by_name(folder, tmp_path, keys, value, needle):
    edit_provenance(folder, 4, _set(keys, value))
    assert_refused(folder, tmp_path, [4], needle)


def test_a_run_from_a_dirty_tree_among_clean_ones_is_refused(folder, tmp_path):
    commit = json.loads(provenance_of(folder, 0).read_text())["workflow_git"]["commit"]
    for run in range(len(MINUTES)):
        edit_provenance(folder, run, _set(("workflow_git",), {"commit": commit, "dirty": False, "local_changes": None}))
    edit_provenance(folder, 6, _set(("workflow_git",), {"commit": commit, "dirty": True, "local_changes": "c" * 64}))
    assert_refused(folder, tmp_path, [6], "workflow_git.dirty true, the set's is false (9 of 10 runs have false)")


def test_a_set_made_from_one_dirty_tree_is_scored_and_the_report_names_it(folder, tmp_path):
    for run in range(len(MINUTES)):
        edit_provenance(folder, run, _set(("workflow_git",), {"commit": "1" * 40, "dirty": True, "local_changes": "d" * 64}))
    report = report_of(folder)
    assert report["valid_submission"] is True, report["valid_submission_reasons"]
    assert report["identity_notes"] == [
        f"runs were made from a checkout with uncommitted changes (diff sha256 {'d' * 12}): their commit alone does not say which code made them"
    ]


def test_a_run_made_before_runs_recorded_their_config_is_refused(folder, tmp_path):
    edit_provenance(folder, 2, lambda record: record.pop("config"))
    assert_refused(folder, tmp_path, [2], "config (not recorded) (made before runs recorded it), the campaign's is in")


# ---- identity_problems on its own ----


def record(commit="a" * 40, torch="2.13.0", config=None) -> dict:
    made = identity.CampaignIdentity(commit=commit, dirty=False, config=config or CONFIG, packages={"torch": torch})
    return identity.provenance_fields(made)


def test_where_no_value_has_a_majority_every_run_is_named():
    problems = identity.identity_problems({"runs/0/provenance.json": record(torch="2.13.0"), "runs/1/provenance.json": record(torch="2.12.0")})
    assert problems == [
        'runs/0/provenance.json: packages.torch "2.13.0", other runs of the set have "2.12.0" (no value most runs share)',
        'runs/1/provenance.json: packages.torch "2.12.0", other runs of the set have "2.13.0" (no value most runs share)',
    ]


def test_a_run_without_provenance_among_runs_with_one_is_named_and_plain_logs_have_no_identity():
    problems = identity.identity_problems({"runs/0/provenance.json": record(), "runs/1/provenance.json": None})
    assert problems[0] == "runs/1/provenance.json: missing: what made this run is unknown, and the other runs of its set record it"
    assert identity.identity_problems({"a/provenance.json": None, "b/provenance.json": None}) == []


def test_the_identity_a_run_records_is_the_one_read_back():
    made = identity.compute(CONFIG, Path(__file__).resolve().parents[2], {"x": "1" * 64}, "img", {"torch": "2.13.0"})
    fields = identity.provenance_fields(made)
    assert fields["config"] == CONFIG and fields["data"] == {"x": "1" * 64} and fields["image"] == "img"
    assert set(fields["workflow_git"]) == {"commit", "dirty", "local_changes"}
    assert (fields["workflow_git"]["local_changes"] is None) == (fields["workflow_git"]["dirty"] is False)
    assert identity.identity_problems({"r0": fields, "r1": fields}, identity.CampaignIdentity(config=CONFIG, image="img")) == []


def test_a_bad_identity_file_is_one_line_naming_it(tmp_path):
    from mlperf_wf.errors import ConfigError

    bad = tmp_path / "identity.json"
    bad.write_text('{"config": 3}')
    with pytest.raises(ConfigError, match=r"identity.json: not a campaign identity; delete it and rerun the workflow"):
        identity.read_expected(bad)


def test_the_package_leaves_a_refused_run_out_and_says_why(folder, tmp_path, monkeypatch):
    import shutil

    edit_provenance(folder, 3, lambda record: record.update(config=OTHER_CONFIG))
    report_of(folder)
    shutil.copytree(Path(__file__).resolve().parents[2] / "config", tmp_path / "config")
    monkeypatch.chdir(tmp_path)
    out, check = tmp_path / "package", tmp_path / "package_check.json"
    command = ["package", str(folder / "report.json"), "--org", "acme", "--system", "cpu-tiny", "--ruleset", "6.1.0", "--division", "closed"]
    assert main([*command, "--out", str(out), "--check-out", str(check)]) == 0
    verdict = json.loads(check.read_text())
    assert verdict["valid_for_submission"] is False
    assert any("another campaign identity" in reason and str(folder / "runs/3") in reason for reason in verdict["not_valid_because"])
    packaged = sorted(path.read_text() for path in out.rglob("result_*.txt"))
    assert (folder / "runs/3/result.txt").read_text() not in packaged and len(packaged) == 9


def test_the_data_digest_follows_the_bytes_not_where_the_tree_lies(tmp_path):
    """A prepared tree copied whole and re-recorded (new inodes and ctimes) keeps its digest; a file of another size
    changes it; a verification record is digested without its timing."""
    import shutil

    from mlperf_wf.acquire import prepare

    tree = tmp_path / "a" / "dataset"
    tree.mkdir(parents=True)
    (tree / "shard.bin").write_bytes(b"x" * 100)
    prepare.write_stamps(tree)
    copy = tmp_path / "b" / "dataset"
    shutil.copytree(tree.parent, copy.parent)
    prepare.write_stamps(copy)
    first, second = identity.data_digests([tree])[str(tree)], identity.data_digests([copy])[str(copy)]
    assert first.startswith("tree ") and first == second
    (copy / "shard.bin").write_bytes(b"x" * 101)
    prepare.write_stamps(copy)
    assert identity.data_digests([copy])[str(copy)] != first
    record = {"dataset": "d", "manifest": "m", "files": [{"path": "f", "md5": "0" * 32}], "total_bytes": 1, "bytes_hashed": 1, "seconds": 0.5}
    (tmp_path / "r1.json").write_text(json.dumps(record))
    (tmp_path / "r2.json").write_text(json.dumps({**record, "bytes_hashed": 0, "seconds": 9.0}))
    digests = identity.data_digests([tmp_path / "r1.json", tmp_path / "r2.json"])
    assert digests[str(tmp_path / "r1.json")] == digests[str(tmp_path / "r2.json")]


def test_a_full_scale_identity_holds_the_batch_and_hyperparameters_the_command_gets(tmp_path, monkeypatch):
    # the overrides are a plain mapping: recording them once broke every full-scale DAG that set full_hyperparameters
    import yaml

    from mlperf_wf.config.workflow_config import WorkflowConfig
    from mlperf_wf.plan import plan as planning

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "config").symlink_to(root / "config")
    monkeypatch.chdir(tmp_path)
    defaults = yaml.safe_load((root / "config" / "config.yaml").read_text())

    def recorded(**changes) -> dict:
        settings = WorkflowConfig.parse({**defaults, "scale": "full", **changes})
        return identity.config_of(planning.Plan(settings, project_root=root, workdir=tmp_path), "flux1")["hyperparameters"]

    planned = recorded()
    assert planned["global_batch_size"] == 512 and planned["opt_learning_rate_warmup_steps"] == 1600
    assert planned["micro_batch"] * planned["accumulation"] * planned["replicas"] == 512
    deviating = recorded(full_hyperparameters={"flux1": {"opt_learning_rate_warmup_steps": 0}})
    assert deviating == {**planned, "opt_learning_rate_warmup_steps": 0}
