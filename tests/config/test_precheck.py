"""`mlperf-wf check --configfile F --profile P`: the pre-check for what Snakemake parses before the workflow's own
code runs, where its messages name neither the file nor the line (a tab in a --configfile: "not valid JSON or
YAML"; a profile's unknown executor: its whole usage, over a hundred lines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlperf_wf.cli import main

ROOT = Path(__file__).resolve().parents[2]


def errors_of(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if "error" in line]


def test_a_tab_in_a_configfile_is_one_line_with_the_file_the_line_and_what_is_allowed(tmp_path, capsys):
    configfile = tmp_path / "campaign.yaml"
    configfile.write_text("runs: 3\nsubmission:\n\tdivision: closed\n")
    assert main(["--root", str(ROOT), "check", "--configfile", str(configfile)]) == 2
    errors = errors_of(capsys)
    assert len(errors) == 1, errors
    assert f"{configfile}:3:1: not valid YAML" in errors[0] and "tab" in errors[0] and "spaces" in errors[0], errors[0]


def test_a_configfile_key_the_workflow_does_not_know_is_named_with_its_file(tmp_path, capsys):
    configfile = tmp_path / "campaign.yaml"
    configfile.write_text("runs: 3\nrnus: 4\n")
    assert main(["--root", str(ROOT), "check", "--configfile", str(configfile)]) == 2
    errors = errors_of(capsys)
    assert len(errors) == 1 and f"{configfile}:2: config: unknown key 'rnus'; allowed keys:" in errors[0], errors


def test_a_good_configfile_and_profile_pass(tmp_path, capsys):
    configfile = tmp_path / "campaign.yaml"
    configfile.write_text("runs: 3\n")
    assert main(["--root", str(ROOT), "check", "--configfile", str(configfile), "--profile", str(ROOT / "profiles/local")]) == 0
    out = capsys.readouterr().out
    assert f"{configfile}: valid" in out and "profiles/local/config.yaml: valid" in out, out


@pytest.mark.parametrize(
    ("profile", "needles"),
    [
        ("executor: nosuch\n", (":1: executor: 'nosuch' is not allowed; allowed:", "local", "slurm")),
        ("cores: 2\nrerun-trigers: mtime\n", (":2: rerun-trigers: not a snakemake option",)),
        ("cores: 2\n  jobs: 3\n", (":2:", "not valid YAML")),
    ],
    ids=["unknown executor", "misspelled option", "malformed yaml"],
)
def test_a_bad_profile_is_one_line_not_the_whole_usage(tmp_path, capsys, profile, needles):
    folder = tmp_path / "myprofile"
    folder.mkdir()
    (folder / "config.yaml").write_text(profile)
    assert main(["--root", str(ROOT), "check", "--profile", str(folder)]) == 2
    errors = errors_of(capsys)
    assert len(errors) == 1 and errors[0].startswith(f"mlperf-wf: error: {folder / 'config.yaml'}:"), errors
    assert all(needle in errors[0] for needle in needles), errors[0]


def test_a_profile_that_is_not_there_is_one_line(tmp_path, capsys):
    assert main(["--root", str(ROOT), "check", "--profile", str(tmp_path / "nosuch")]) == 2
    errors = errors_of(capsys)
    assert len(errors) == 1 and f"--profile {tmp_path / 'nosuch'}: no profile folder" in errors[0], errors
