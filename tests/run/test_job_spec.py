"""Job specs (mlperf_wf.run.job_spec) and the launchers that render them (mlperf_wf.run.launchers): every golden spec
(``tests/benchmarks/<name>/golden/spec``, written by the plan's golden tests) renders the golden job of
``tests/benchmarks/<name>/golden`` at the same key, for every launcher; a spec reads back what was written, and a spec of another version or with a bad field is
refused in one line naming the file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mlperf_wf.errors import ConfigError
from mlperf_wf.plan import plan as planning
from mlperf_wf.run.job_spec import JobSpec
from tests.plan.test_plan import GOLDEN, ROOT, SPEC_GOLDEN, make_plan, portable, workdir  # noqa: F401 - fixture


def specs_in(tree: dict, path: tuple[str, ...] = ()):
    """(keys, spec) of every spec in a golden spec file, at any depth."""
    for key, value in tree.items():
        if isinstance(value, dict) and "spec_version" in value:
            yield (*path, key), value
        elif isinstance(value, dict):
            yield from specs_in(value, (*path, key))


def on_this_machine(spec: dict, folder: Path) -> JobSpec:
    """A golden spec with the names ``portable`` wrote read back as this machine's paths."""
    text = json.dumps(spec)
    for name, path in {"{workdir}": str(folder), "{venv}": sys.prefix, "{python}": sys.base_prefix}.items():
        text = text.replace(name, path)
    return JobSpec.parse(text)


def test_every_launcher_renders_the_golden_jobs_from_the_golden_specs(workdir):  # noqa: F811
    rendered = set()
    goldens = ROOT / "tests" / "benchmarks"
    files = sorted(goldens.glob(f"*/{GOLDEN}/{SPEC_GOLDEN}/*.json"))
    commands = sorted(goldens.glob(f"*/{GOLDEN}/*.json"))
    assert [path.parent / SPEC_GOLDEN / path.name for path in commands] == files, "a golden plan without its specs, or specs without their plan"
    for path in files:
        jobs = json.loads((path.parent.parent / path.name).read_text())
        for keys, spec in specs_in(json.loads(path.read_text())):
            expected = jobs
            for key in keys:
                expected = expected[key]
            expected = {key: value for key, value in expected.items() if key != "inputs"}  # an image job's inputs
            got = portable(planning.train_job_of(on_this_machine(spec, workdir)).as_dict(), workdir)
            assert got == expected, f"{path.name}: {'/'.join(keys)}"
            rendered.add((spec["scale"], spec["launcher"]))
    assert rendered == {("tiny", "local"), ("tiny", "docker"), *(("full", name) for name in ("local", "docker", "apptainer", "pyxis"))}


def test_a_spec_reads_back_what_was_written_and_refuses_another_version(workdir, tmp_path):  # noqa: F811
    plan = make_plan(workdir, scale="full", launcher="pyxis", full_geometry={"llama2_70b_lora": {"nodes": 2}})
    spec = plan.of("llama2_70b_lora").job_spec(1)
    path = tmp_path / "spec.json"
    spec.write(path)
    assert JobSpec.read(path) == spec
    raw = json.loads(path.read_text())
    path.write_text(json.dumps({**raw, "spec_version": 2}))
    with pytest.raises(ConfigError, match=rf"^job spec {path}: spec_version is 2; this mlperf-wf reads version 1$"):
        JobSpec.read(path)
    path.write_text(json.dumps({**raw, "launcher": "slurm"}))
    with pytest.raises(ConfigError, match=rf"^job spec {path}: launcher: .*slurm"):
        JobSpec.read(path)
    with pytest.raises(ConfigError, match=r"^job spec .*missing.json: cannot be read"):
        JobSpec.read(tmp_path / "missing.json")


def test_a_spec_that_cannot_launch_is_refused_in_one_line(workdir, tmp_path):  # noqa: F811
    plan = make_plan(workdir, scale="full", launcher="docker", full_geometry={"llama2_70b_lora": {"nodes": 1}})
    raw = json.loads(plan.of("llama2_70b_lora").job_spec(1).model_dump_json())
    path = tmp_path / "spec.json"
    for changes, said in (
        ({"image": None}, "launcher docker needs an 'image'; only local runs on the host"),
        ({"process": None}, "a job spec without 'refused' needs a 'process'"),
        ({"launcher": "none"}, "launcher none is only for a job that refuses"),
    ):
        path.write_text(json.dumps({**raw, **changes}))
        with pytest.raises(ConfigError, match=rf"^job spec {path}: .*{said}") as err:
            JobSpec.read(path)
        assert "\n" not in str(err.value)
