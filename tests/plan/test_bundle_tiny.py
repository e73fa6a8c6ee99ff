"""The offline bundle at tiny scale, as docs/offline.md types it: exported from a fresh clone whose tiny datasets were
verified (no image pinned, none pushed), a failed export retried, imported into a new folder without network and the
tiny campaign run there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.plan import bundle
from tests.workflow.test_workflow import ROOT, snakemake_env

BENCHMARK = "deepseekv3_671b"
"""A benchmark whose tiny campaign of one run takes under a minute on 2 cores (42 s on a 2-vCPU AMD EPYC VM)."""

needs_unshare = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux) for a folder without network")


def _run(cwd: Path, *argv: str, offline: bool = False, pypi: bool = False) -> subprocess.CompletedProcess:
    """A command as a user types it in ``cwd``: ``mlperf-wf`` and ``snakemake`` from this venv; ``offline``: in a network
    namespace of its own (no interface up); ``pypi``: as on the connected side, where pip reaches its index."""
    env = dict(os.environ) if pypi else snakemake_env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    prefix = ["unshare", "--net"] if offline else []
    return subprocess.run([*prefix, *argv], cwd=cwd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)


def _export(connected: Path, out: Path) -> subprocess.CompletedProcess:
    return _run(connected, "mlperf-wf", "bundle", "export", "--benchmark", BENCHMARK, "--scale", "tiny", "--out", str(out), pypi=True)


@pytest.fixture(scope="module")
def connected(tmp_path_factory) -> Path:
    """A fresh clone of the checkout (as a user makes one) whose tiny datasets were generated and verified with the
    docs' command (seconds for this benchmark); no image is pinned in its config and none was built or pushed."""
    base = tmp_path_factory.mktemp("tiny-bundle")
    clone = base / "connected"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, capture_output=True)
    records = [f"resources/tiny/verified/{dataset_id}.json" for dataset_id in bundle_datasets()]
    done = _run(clone, "snakemake", "--cores", "2", *records, "--config", f"benchmarks=[{BENCHMARK}]")
    assert done.returncode == 0, done.stderr[-3000:]
    return clone


@needs_unshare
@pytest.mark.slow
def test_a_tiny_bundle_from_a_fresh_clone_survives_a_failed_export_and_runs_the_tiny_campaign_offline(connected):
    base, out = connected.parent, connected.parent / "bundle"
    # a failure part way (the datasets half copied): a link the user left in the last dataset's mirror
    last = sorted(bundle_datasets())[-1]
    stray = connected / "resources/tiny/mirror" / last / "stray-link"
    stray.symlink_to("/etc/hostname")
    failed = _export(connected, out)
    assert failed.returncode == 2, failed.stderr[-3000:]
    [line] = failed.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"mlperf-wf: error: {stray}: a link"), failed.stderr
    assert not (out / bundle.BUNDLE_FILE).exists() and (out / "datasets").is_dir()
    # what the failed export left is no bundle to import
    (base / "elsewhere").mkdir()
    refused = _run(base, "mlperf-wf", "--root", str(base / "elsewhere"), "bundle", "import", str(out), offline=True)
    assert refused.returncode == 2 and refused.stderr.strip().endswith("did not finish; run `mlperf-wf bundle export` into it again")
    assert not any((base / "elsewhere").iterdir())
    # a file of the user's beside it is neither exported nor removed
    (out / "mine.txt").write_text("mine\n")
    beside = _export(connected, out)
    assert beside.returncode == 2 and "--out " in beside.stderr and "holds mine.txt beside an export that did not finish" in beside.stderr
    assert (out / "mine.txt").read_text() == "mine\n"
    (out / "mine.txt").unlink()
    # the retry, once the link is gone, needs nothing removed by hand
    stray.unlink()
    done = _export(connected, out)
    assert done.returncode == 0, done.stderr[-3000:]
    expect = done.stdout.split(f"{bundle.BUNDLE_FILE} ", 1)[1].split(")", 1)[0]
    described = bundle.check(out, expect)
    assert described["scale"] == "tiny" and described["images"] == [] and set(described["datasets"]) == set(bundle_datasets())
    assert not any("stray-link" in name for name in described["files"])
    assert f"bundle: {BENCHMARK}: no image carried (full_container.{BENCHMARK}.digest unset" in done.stderr

    # on the site: the docs' commands, with no network
    site = base / "site"
    site.mkdir()
    [archive] = (out / "source").glob("mlperf-workflow-*.tar")
    subprocess.run(["tar", "-xf", str(archive), "-C", str(site)], check=True)
    imported = _run(site, "mlperf-wf", "bundle", "import", str(out), "--expect", expect, offline=True)
    assert imported.returncode == 0, imported.stderr[-3000:]
    assert not (site / "config/site.yaml").exists() and not (site / "resources/images").exists()  # tiny runs start no image
    campaign = _run(site, "snakemake", "--cores", "2", "--config", f"benchmarks=[{BENCHMARK}]", "runs=1", offline=True)
    assert campaign.returncode == 0, campaign.stderr[-4000:]
    report = json.loads((site / f"results/tiny/{BENCHMARK}/report.json").read_text())
    assert len(report["runs"]) == 1 and report["runs"][0]["compliance"] in ("passed", "passed_except_declared")
    # the site's download and verify rules ran on the carried mirrors; nothing was generated
    assert not (site / "logs/tiny/generate_tiny_mirror").exists()
    assert sorted(p.stem for p in (site / "resources/tiny/verified").glob("*.json") if not p.stem.endswith(".stamps")) == sorted(bundle_datasets())


def bundle_datasets() -> list[str]:
    from mlperf_wf.config import registry

    return registry.load_benchmark(BENCHMARK).datasets_read()


def test_with_the_docker_launcher_the_tiny_image_is_named_as_not_carried(connected):
    (connected.parent / "docker.yaml").write_text("launcher: docker\n")
    out = connected.parent / "bundle-docker"
    argv = ["mlperf-wf", "bundle", "export", "--benchmark", BENCHMARK, "--scale", "tiny", "--out", str(out), "--configfile", "../docker.yaml"]
    done = _run(connected, *argv, pypi=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bundle: tiny_image mlperf-wf-tiny:bookworm (launcher: docker) is not carried: a userland the site makes" in done.stderr
    assert json.loads((out / bundle.BUNDLE_FILE).read_text())["images"] == []


def test_a_folder_holding_other_files_is_refused_by_name_and_left_as_it_was(connected):
    out = connected.parent / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("mine\n")
    done = _export(connected, out)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line == f"mlperf-wf: error: --out {out}: holds todo.txt, which export did not write; give a new or empty folder"
    assert [p.name for p in out.iterdir()] == ["todo.txt"] and (out / "todo.txt").read_text() == "mine\n"
