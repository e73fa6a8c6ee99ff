"""The offline bundle: exported beside a loopback registry, imported where no network exists, checked file by file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from mlperf_wf.acquire import image_files
from mlperf_wf.plan import bundle
from tests.oci_registry import LoopbackRegistry, _layer, push_image
from tests.workflow.test_workflow import ROOT, new_workdir, planned_train_lines, snakemake, snakemake_argv, snakemake_env

BENCHMARK = "deepseekv3_671b"
"""A benchmark whose tiny campaign is short, read from three datasets."""
REPOSITORY = "mlperf/deepseekv3_671b"

needs_tools = pytest.mark.skipif(
    not (shutil.which("skopeo") and shutil.which("mksquashfs") and shutil.which("unshare")),
    reason="needs skopeo, squashfs-tools and util-linux (bash .ci/run installs them)",
)


def _mlperf_wf(root: Path, *args: str, netns: bool = False, pypi: bool = False) -> subprocess.CompletedProcess:
    """``mlperf-wf`` in ``root``; ``netns``: in a network namespace of its own (no interface but a loopback that is
    down); ``pypi``: as on the connected side, where pip reaches its index (the checker's wheel), else without."""
    argv = [sys.executable, "-m", "mlperf_wf", "--root", str(root), *args]
    if netns:
        argv = ["unshare", "--net", *argv]
    return subprocess.run(argv, capture_output=True, text=True, env=None if pypi else snakemake_env())


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_mirrors) -> dict:
    """A connected workflow folder (the benchmark's datasets verified, its image pinned in a loopback registry) and
    the bundle exported from it, the registry gone afterwards."""
    base = tmp_path_factory.mktemp("bundle")
    connected = tiny_mirrors.seed(new_workdir(base / "connected"), BENCHMARK)
    records = [f"resources/tiny/verified/{dataset_id}.json" for dataset_id in tiny_mirrors.datasets(BENCHMARK)]
    snakemake(connected, *records, "--cores", "2", "--config", f"benchmarks=[{BENCHMARK}]")
    with LoopbackRegistry() as registry:
        layers = [{"/workspace/run.sh": b"#!/bin/sh\necho ref\n", "/workspace/old.txt": b"gone"}, {"/workspace/new.txt": b"kept"}]
        layers[1]["/workspace/.wh.old.txt"] = b""  # the second layer deletes a file of the first
        digest = push_image(registry.host, REPOSITORY, "ref", layers, {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/workspace"}, "/workspace")
        config = yaml.safe_load((connected / "config/config.yaml").read_text())
        config["full_container"] = {BENCHMARK: {"image": f"{registry.host}/{REPOSITORY}:ref", "digest": digest}}
        (connected / "config/config.yaml").write_text(yaml.safe_dump(config))
        out = base / "bundle"
        done = _mlperf_wf(connected, "bundle", "export", "--benchmark", BENCHMARK, "--scale", "tiny", "--out", str(out), pypi=True)
    assert done.returncode == 0, done.stderr[-3000:]
    expect = done.stdout.split(f"{bundle.BUNDLE_FILE} ", 1)[1].split(")", 1)[0]
    return {"base": base, "bundle": out, "expect": expect, "digest": digest, "image": f"{registry.host}/{REPOSITORY}:ref"}


@pytest.fixture(scope="module")
def imported(exported, rehearsal_box) -> dict:
    """A fresh workflow folder where the bundle was imported and a tiny campaign ran through ``--profile slurm`` on the
    cluster in a box, both from the network of the box's controller (its private bridge only: no route out), its jobs
    on the box's nodes (no route out either)."""
    site = new_workdir(exported["base"] / "site")
    images = exported["base"] / "site-images"
    offline = rehearsal_box.on_network_of(rehearsal_box.controller, [])
    routes = subprocess.run([*offline, "ip", "route"], capture_output=True, text=True, check=True).stdout
    assert "default" not in routes, f"the box's network has a route out: {routes}"
    argv = [*offline, sys.executable, "-m", "mlperf_wf", "--root", str(site), "bundle", "import", str(exported["bundle"])]
    done = subprocess.run([*argv, "--images", str(images), "--expect", exported["expect"]], capture_output=True, text=True, env=snakemake_env())
    assert done.returncode == 0, done.stderr[-3000:]
    argv = snakemake_argv(site, "--profile", str(ROOT / "profiles/slurm"), "--config", f"benchmarks=[{BENCHMARK}]", "runs=1")
    # no slurmdbd in the box: poll with squeue, soon
    argv += ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "3", "--latency-wait", "5"]
    argv += ["--slurm-keep-successful-logs"]
    # detached from the test's terminal and process group, as SLURM runs want (see the machine notes)
    env = snakemake_env() | rehearsal_box.env
    campaign = subprocess.run([*offline, *argv], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, start_new_session=True, timeout=900)
    return {"site": site, "images": images, "campaign": campaign, "routes": routes}


@needs_tools
@pytest.mark.slow
def test_the_bundle_lists_every_file_with_its_digest_and_the_image_as_pinned(exported):
    described = json.loads((exported["bundle"] / bundle.BUNDLE_FILE).read_text())
    files = {str(p.relative_to(exported["bundle"])) for p in exported["bundle"].rglob("*") if p.is_file()} - {bundle.BUNDLE_FILE}
    assert set(described["files"]) == files
    for name, entry in described["files"].items():
        assert image_files.sha256_file(exported["bundle"] / name) == entry["sha256"]
    [image] = described["images"]
    assert image["digest"] == exported["digest"] and image["benchmarks"] == [BENCHMARK]
    archived = image_files.read_oci_archive(exported["bundle"] / image["oci_archive"])
    assert archived.manifest_digest == exported["digest"] and archived.config_digest == image["config_digest"]
    # the enroot image: the layers applied in order (the whiteout removed old.txt), the image's ENV and WORKDIR
    listing = subprocess.run(["unsquashfs", "-l", str(exported["bundle"] / image["squashfs"])], capture_output=True, text=True).stdout
    assert "squashfs-root/workspace/new.txt" in listing and "old.txt" not in listing
    unpacked = exported["base"] / "unsquashed"
    subprocess.run(["unsquashfs", "-d", str(unpacked), str(exported["bundle"] / image["squashfs"])], check=True, capture_output=True)
    assert (unpacked / "etc/environment").read_text() == "PATH=/usr/bin:/bin\nPYTHONPATH=/workspace\n"
    assert "cd /workspace" in (unpacked / "etc/rc").read_text()
    assert {Path(wheel).name.split("-")[0] for wheel in described["wheels"] if wheel.endswith(".whl")} == {"mlperf_workflow", "mlperf_logging"}
    assert set(described["datasets"]) == set(_datasets())
    # the workflow itself, at its commit: what the site unpacks as its workflow folder
    with tarfile.open(exported["bundle"] / described["source"]["archive"]) as source:
        names = set(source.getnames())
    assert {"workflow/Snakefile", "profiles/slurm/config.yaml", "config/config.yaml", "pyproject.toml"} <= names


def _datasets() -> list[str]:
    from mlperf_wf.config import registry

    return registry.load_benchmark(BENCHMARK).datasets_read()


@needs_tools
@pytest.mark.slow
def test_imported_without_network_a_tiny_campaign_runs_to_its_report_on_the_cluster(imported, exported):
    campaign = imported["campaign"]
    assert campaign.returncode == 0, campaign.stderr[-4000:]
    site = imported["site"]
    # every job went through the box's SLURM
    slurm_logs = {p.relative_to(site / ".snakemake/slurm_logs").parts[0] for p in (site / ".snakemake/slurm_logs").rglob("*.log")}
    assert {"rule_train", "rule_download"} <= slurm_logs, slurm_logs
    report = json.loads((site / f"results/tiny/{BENCHMARK}/report.json").read_text())
    assert len(report["runs"]) == 1 and report["runs"][0]["compliance"] in ("passed", "passed_except_declared")
    # the site's download and verify rules ran on the carried mirrors; nothing was generated or fetched
    assert not (site / "logs/tiny/generate_tiny_mirror").exists()
    assert sorted(p.stem for p in (site / "resources/tiny/verified").glob("*.json") if not p.stem.endswith(".stamps")) == sorted(_datasets())
    site_config = yaml.safe_load((site / "config/site.yaml").read_text())
    local = site_config["full_container"][BENCHMARK]
    assert local["digest"] == exported["digest"] and local["image"] == exported["image"]
    assert Path(local["squashfs"]).parent == imported["images"].resolve() and Path(local["squashfs"]).is_file()
    assert Path(local["oci_archive"]).is_file() and "image_id" not in local


@needs_tools
@pytest.mark.slow
def test_after_import_the_full_scale_plan_starts_the_local_image_files(imported):
    site = imported["site"]
    local = yaml.safe_load((site / "config/site.yaml").read_text())["full_container"][BENCHMARK]
    config = ("--config", f"benchmarks=[{BENCHMARK}]", "scale=full", "runs=1")
    pyxis = snakemake(site, "-n", "-p", *config, "launcher=pyxis", f"full_geometry={{{BENCHMARK}: {{nodes: 1}}}}")
    [line] = planned_train_lines(pyxis.stdout, BENCHMARK)
    assert f"--container-image={local['squashfs']}" in line
    apptainer = snakemake(site, "-n", "-p", *config, "launcher=apptainer", f"full_geometry={{{BENCHMARK}: {{nodes: 1}}}}")
    [line] = planned_train_lines(apptainer.stdout, BENCHMARK)
    assert f" oci-archive:{local['oci_archive']} " in line
    # an image file gone from the shared filesystem is a plan-time problem, named (a dry run lists every problem; a run
    # refuses to start on them)
    moved = Path(local["squashfs"]).rename(Path(local["squashfs"]).with_suffix(".moved"))
    try:
        missing = snakemake(site, "-n", *config, "launcher=pyxis", f"full_geometry={{{BENCHMARK}: {{nodes: 1}}}}", check_rc=False)
    finally:
        moved.rename(local["squashfs"])
    assert f"full_container.{BENCHMARK}.squashfs: {local['squashfs']} does not exist" in missing.stderr


def _copy_of(exported: dict, name: str) -> Path:
    copy = exported["base"] / name
    shutil.copytree(exported["bundle"], copy)  # real copies: the bundle's datasets are hard links of the connected folder
    return copy


@needs_tools
@pytest.mark.slow
def test_a_changed_added_or_missing_file_is_refused_by_name_and_nothing_is_placed(exported):
    described = json.loads((exported["bundle"] / bundle.BUNDLE_FILE).read_text())
    [image] = described["images"]
    dataset_file = next(name for name in described["files"] if name.startswith("datasets/"))
    cases = {
        "changed": lambda b: (b / dataset_file).write_bytes((b / dataset_file).read_bytes()[:-1] + b"\0"),
        "added": lambda b: (b / "images" / "extra.sqsh").write_bytes(b"x"),
        "missing": lambda b: (b / image["squashfs"]).unlink(),
    }
    for case, tamper in cases.items():
        copy = _copy_of(exported, f"tampered-{case}")
        tamper(copy)
        site = new_workdir(exported["base"] / f"site-{case}")
        done = _mlperf_wf(site, "bundle", "import", str(copy), "--images", str(site / "images"), netns=True)
        assert done.returncode == 2, (case, done.stderr)
        [line] = done.stderr.strip().splitlines()
        named = {"changed": dataset_file, "added": "images/extra.sqsh", "missing": image["squashfs"]}[case]
        assert line.startswith(f"mlperf-wf: error: {copy / named}: "), (case, line)
        assert not (site / "config/site.yaml").exists() and not (site / "resources").exists() and not (site / "images").exists()
    # bundle.json itself, against the digest export printed
    copy = _copy_of(exported, "tampered-manifest")
    described["images"][0]["digest"] = "sha256:" + "0" * 64
    (copy / bundle.BUNDLE_FILE).write_text(json.dumps(described))
    done = _mlperf_wf(exported["base"] / "site-changed", "bundle", "import", str(copy), "--expect", exported["expect"])
    assert done.returncode == 2 and f"{copy / bundle.BUNDLE_FILE}: sha256 " in done.stderr and "was changed" in done.stderr


@needs_tools
def test_an_unpinned_image_or_an_unverified_dataset_is_not_exported(tmp_path):
    workdir = new_workdir(tmp_path / "w")
    done = _mlperf_wf(workdir, "bundle", "export", "--benchmark", BENCHMARK, "--out", str(tmp_path / "b"))
    assert done.returncode == 2
    assert done.stderr.strip().startswith(f"mlperf-wf: error: full_container.{BENCHMARK}.digest: unset for ")
    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    config["full_container"] = {BENCHMARK: {"digest": "sha256:" + "1" * 64}}
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(config))
    done = _mlperf_wf(workdir, "bundle", "export", "--benchmark", BENCHMARK, "--scale", "tiny", "--out", str(tmp_path / "c"))
    assert done.returncode == 2 and not (tmp_path / "c").exists()
    first = sorted(_datasets())[0]
    assert done.stderr.strip().startswith(f"mlperf-wf: error: resources/tiny/verified/{first}.json: missing: dataset {first} is not verified")


def test_a_layer_cannot_write_outside_the_root_filesystem(tmp_path):
    archive = tmp_path / "evil.oci.tar"
    layer = _layer({"../escaped": b"x"})
    _write_archive(archive, [layer])
    with pytest.raises(image_files.ImageFileError, match="leaves the root filesystem"):
        image_files.unpack_rootfs(archive, tmp_path / "rootfs")
    assert not (tmp_path / "escaped").exists()


def _write_archive(path: Path, layers: list[bytes]) -> None:
    """An OCI archive of ``layers`` (gzipped tarballs), as skopeo writes one."""
    import gzip
    import hashlib
    import io

    def digest(data: bytes) -> str:
        return "sha256:" + hashlib.sha256(data).hexdigest()

    config = json.dumps({"config": {}, "rootfs": {"type": "layers", "diff_ids": [digest(gzip.decompress(layer)) for layer in layers]}}).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest(layer), "size": len(layer)} for layer in layers],
        }
    ).encode()
    index = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": image_files.MANIFEST_TYPES[0], "digest": digest(manifest), "size": len(manifest)}]})
    with tarfile.open(path, "w") as tar:
        for name, data in [("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'), ("index.json", index.encode())] + [
            (f"blobs/sha256/{digest(blob).split(':')[1]}", blob) for blob in (config, manifest, *layers)
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


APPTAINER = """#!/bin/sh
# apptainer stand-in (tests only; no Apptainer here): `apptainer build OUT oci-archive:PATH` as the real one is called
[ "$1" = build ] && [ "$#" = 3 ] && case "$3" in oci-archive:/*) true ;; *) false ;; esac || {{ echo "unexpected: $*" >&2; exit 2; }}
[ -f "${{3#oci-archive:}}" ] || {{ echo "no archive ${{3#oci-archive:}}" >&2; exit 1; }}
echo "$*" >> {calls}
echo "SIF of $3" > "$2"
"""


@needs_tools
@pytest.mark.slow
def test_where_apptainer_exists_the_import_builds_each_sif_once_and_the_plan_starts_it(exported, tmp_path):
    stand_ins, calls = tmp_path / "bin", tmp_path / "apptainer-calls"
    stand_ins.mkdir()
    (stand_ins / "apptainer").write_text(APPTAINER.format(calls=calls))
    (stand_ins / "apptainer").chmod(0o755)
    site = new_workdir(tmp_path / "site")
    images = tmp_path / "images"
    argv = [sys.executable, "-m", "mlperf_wf", "--root", str(site), "bundle", "import", str(exported["bundle"]), "--images", str(images)]
    env = snakemake_env() | {"PATH": f"{stand_ins}{os.pathsep}{snakemake_env()['PATH']}"}
    for _ in range(2):  # imported once per site: a second import finds the SIF there
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
    local = yaml.safe_load((site / "config/site.yaml").read_text())["full_container"][BENCHMARK]
    assert Path(local["sif"]) == (images / Path(local["oci_archive"]).name.removesuffix(".oci.tar")).with_suffix(".sif").resolve()
    assert calls.read_text().splitlines() == [f"build {local['sif']}.partial oci-archive:{local['oci_archive']}"]
    config = ("--config", f"benchmarks=[{BENCHMARK}]", "scale=full", "runs=1", "launcher=apptainer", f"full_geometry={{{BENCHMARK}: {{nodes: 1}}}}")
    [line] = planned_train_lines(snakemake(site, "-n", "-p", *config).stdout, BENCHMARK)
    assert f" {local['sif']} " in line and "oci-archive:" not in line
    Path(local["sif"]).unlink()
    missing = snakemake(site, "-n", *config, check_rc=False)
    assert f"full_container.{BENCHMARK}.sif: {local['sif']} does not exist" in missing.stderr
    # without apptainer, and --no-sif, none is built
    done = subprocess.run([*argv, "--no-sif"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and not Path(local["sif"]).exists() and calls.read_text().count("build") == 1


def test_a_dataset_made_in_an_image_is_carried_only_when_made_and_else_made_at_the_site(tmp_path):
    """qwen35_397b_grpo's Megatron conversion is a GPU job of its image (make_in_image): a connected side without it
    exports the other inputs and the offline site makes it; one made and verified here is carried like any dataset.
    A published input that is not verified still stops the export, naming it."""
    from mlperf_wf.config.workflow_config import WorkflowConfig
    from mlperf_wf.plan import plan as planning

    config = {**yaml.safe_load((ROOT / "config" / "config.yaml").read_text()), "scale": "full", "benchmarks": ["qwen35_397b_grpo"]}
    (tmp_path / "config").symlink_to(ROOT / "config")
    plan = planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=tmp_path)
    published = ["qwen35_397b_a17b_checkpoint", "r2e_gym_subset", "r2e_gym_task_images"]
    for dataset_id in published:
        (tmp_path / plan.verified_record(dataset_id)).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / plan.verified_record(dataset_id)).write_text("{}\n")
    assert bundle._verified_datasets(plan, tmp_path, ["qwen35_397b_grpo"]) == published
    (tmp_path / plan.verified_record("qwen35_397b_megatron_checkpoint")).write_text("{}\n")
    assert bundle._verified_datasets(plan, tmp_path, ["qwen35_397b_grpo"]) == sorted([*published, "qwen35_397b_megatron_checkpoint"])
    (tmp_path / plan.verified_record("r2e_gym_task_images")).unlink()
    with pytest.raises(bundle.BundleError, match=r"resources/full/verified/r2e_gym_task_images\.json: missing: dataset r2e_gym_task_images is not verified"):
        bundle._verified_datasets(plan, tmp_path, ["qwen35_397b_grpo"])
