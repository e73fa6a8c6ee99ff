"""Hugging Face Hub downloads at a pinned commit: the hub's layout, resume, parallel files, commit and checksum failures."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.acquire.download import staging_dir_for
from mlperf_wf.acquire.hub import HubRepo, download_hub_dataset, hub_auth_headers
from mlperf_wf.acquire.mirror import generate_tiny_mirror
from mlperf_wf.acquire.verify import quarantine_dir_for, verify_dataset
from mlperf_wf.config.registry import DatasetDef, DatasetFile
from mlperf_wf.errors import ChecksumError, ConfigError, DownloadError
from tests import tiny_hub_repo
from tests.hfserver import HubServer, git_blob_id
from tests.r2server import kill_mid_file

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/tiny-tasks"
COMMIT = "e8b9fcbce43eaca0dc2c0d4798ee6f3e965f590a"
OTHER_COMMIT = "1" * 40
TRAIN = "data/train-00000-of-00001.parquet"
VALIDATION = "data/validation.jsonl"


def make_repo(root: Path, big_bytes: int = 0) -> dict[str, bytes]:
    folder = root / "data" / "ds"
    tiny_hub_repo.generate(folder, seed=3, big_bytes=big_bytes)
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def hub(server: HubServer, revision: str = COMMIT) -> HubRepo:
    return HubRepo(server.endpoint, REPO, "dataset", revision)


def staged(dest: Path) -> list[str]:
    staging = staging_dir_for(dest)
    return sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())


def test_download_at_the_pinned_commit_checks_every_file_and_places_the_folder(tmp_path):
    contents = make_repo(tmp_path / "hub")
    dest = tmp_path / "out" / "ds"
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server:
        record = download_hub_dataset(hub(server), dest, headers=hub_auth_headers({"HF_TOKEN": "hf_secret"}), catalog_endpoint=server.endpoint)
    for rel, data in contents.items():
        assert (dest / rel).read_bytes() == data
    assert record.commit == COMMIT and record.base_url == f"{server.endpoint}/datasets/{REPO}/resolve/{COMMIT}"
    assert record.sha256 == {rel: hashlib.sha256(data).hexdigest() for rel, data in contents.items()}
    assert record.bytes_transferred == sum(len(d) for d in contents.values())
    saved = json.loads((dest / "download.json").read_text())
    assert saved["commit"] == COMMIT and saved["files"][TRAIN] == hashlib.md5(contents[TRAIN]).hexdigest()
    assert sorted(line.split("  ")[1] for line in (dest / "manifest.md5").read_text().splitlines()) == sorted(contents)
    assert not staging_dir_for(dest).exists()
    assert verify_dataset(dest, stamps_file=tmp_path / "stamps.json").bytes_hashed == 0, "the md5s computed while streaming are reused"
    # The token goes to the hub, never to the CDN host an LFS file is redirected to.
    listing = [r for r in server.requests if r.path.startswith("/api/")]
    assert listing[0].path.endswith("?blobs=true") and listing[0].headers.get("Authorization") == "Bearer hf_secret"
    assert server.file_requests(TRAIN) and all("Authorization" not in r.headers for r in server.file_requests(TRAIN))
    assert all(r.headers.get("Authorization") == "Bearer hf_secret" for r in server.file_requests("README.md"))


def test_model_repositories_have_no_url_prefix(tmp_path):
    contents = make_repo(tmp_path / "hub")
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT, repository_type="model") as server:
        download_hub_dataset(HubRepo(server.endpoint, REPO, "model", COMMIT), tmp_path / "out" / "ckpt", headers={})
    assert {p.path.split("?")[0] for p in server.requests if p.path.startswith("/api/")} == {f"/api/models/{REPO}/revision/{COMMIT}"}
    assert (tmp_path / "out" / "ckpt" / "README.md").read_bytes() == contents["README.md"]


def test_kill_mid_file_then_rerun_resumes_from_bytes_on_disk(tmp_path):
    """kill -9 of the CLI during an LFS file; the rerun asks the CDN for the missing bytes only."""
    size = 4_000_000
    contents = make_repo(tmp_path / "hub", big_bytes=size)
    dest = tmp_path / "out" / "ds"
    part = staging_dir_for(dest) / "weights" / "model.bin.part"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT, chunk=32 * 1024, delay=0.02) as server:
        command = [sys.executable, "-m", "mlperf_wf", "download", "--dest", str(dest), "--endpoint", server.endpoint, "--repository", REPO]
        command += ["--revision", COMMIT, "--jobs", "2"]
        on_disk = kill_mid_file(command, part, size, env)
        assert not dest.exists(), "nothing is moved into place before the dataset is complete"
        server.delay = 0.0
        first_run = len(server.requests)
        subprocess.run(command, check=True, capture_output=True, env=env)
        rerun = server.requests[first_run:]
    big = [r for r in rerun if r in server.file_requests("weights/model.bin")]
    assert [r.headers.get("Range") for r in big] == [f"bytes={on_disk}-"], "the Range header survives the redirect to the CDN"
    assert sum(r.sent for r in big) == size - on_disk
    for rel, data in contents.items():
        assert (dest / rel).read_bytes() == data


def test_files_are_fetched_in_parallel(tmp_path):
    make_repo(tmp_path / "hub", big_bytes=300_000)
    (tmp_path / "hub" / "data" / "ds" / "weights" / "second.bin").write_bytes(bytes(300_000))
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT, chunk=16 * 1024, delay=0.01) as server:
        download_hub_dataset(hub(server), tmp_path / "out" / "ds", headers={}, jobs=3)
    bodies = [r for r in server.requests if r.sent]
    # The server sleeps after each chunk, the last one too: a next request may begin within that last sleep even when sequential.
    margin = 5 * server.delay
    overlapping = max(sum(1 for other in bodies if other.started < r.finished - margin and r.started < other.finished - margin) for r in bodies)
    assert overlapping >= 2, "several files are in flight at once"


@pytest.mark.parametrize("fault", ["reset", "truncate", "503", "429", "flip"])
def test_transient_faults_on_hub_and_cdn_are_retried(tmp_path, fault):
    contents = make_repo(tmp_path / "hub")
    dest = tmp_path / "out" / "ds"
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT, chunk=1024) as server:
        server.faults = {TRAIN: [fault], "README.md": [fault]}
        download_hub_dataset(hub(server), dest, headers={}, backoff=0.01)
    assert all((dest / rel).read_bytes() == data for rel, data in contents.items())


def test_listing_of_another_commit_is_one_line_and_keeps_what_is_staged(tmp_path):
    make_repo(tmp_path / "hub")
    dest = tmp_path / "out" / "ds"
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server:
        server.faults = {VALIDATION: ["404"]}
        with pytest.raises(DownloadError, match="HTTP 404"):
            download_hub_dataset(hub(server), dest, headers={}, jobs=1)
        before = staged(dest)
        assert TRAIN in before
        server.listing_commit = OTHER_COMMIT
        with pytest.raises(DownloadError) as err:
            download_hub_dataset(hub(server), dest, headers={})
    message = str(err.value)
    assert "\n" not in message and message.startswith("ds: ")
    assert f"resolves revision {COMMIT} to commit {OTHER_COMMIT}; expected the pinned commit {COMMIT}" in message
    assert staged(dest) == before, "nothing already downloaded is lost"


def test_a_file_served_from_another_commit_is_refused_before_a_byte_is_kept(tmp_path):
    make_repo(tmp_path / "hub")
    dest = tmp_path / "out" / "ds"
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server:
        server.served_commit = {TRAIN: OTHER_COMMIT}
        with pytest.raises(DownloadError) as err:
            download_hub_dataset(hub(server), dest, headers={}, jobs=1)
    assert str(err.value) == (
        f"ds: /datasets/{REPO}/resolve/{COMMIT}/{TRAIN} is served from commit {OTHER_COMMIT}; expected the pinned commit {COMMIT} (nothing kept from it)"
    )
    assert not (staging_dir_for(dest) / f"{TRAIN}.part").exists() or (staging_dir_for(dest) / f"{TRAIN}.part").stat().st_size == 0
    assert {"README.md", VALIDATION} <= set(staged(dest)), "the other files stay staged"
    assert not dest.exists()


@pytest.mark.parametrize(
    ("rel", "what"),
    [(TRAIN, r"sha256 mismatch after download: expected [0-9a-f]{64}, actual [0-9a-f]{64}"), ("README.md", r"git blob mismatch after download")],
)
def test_corrupt_bytes_are_quarantined_with_a_one_line_error(tmp_path, rel, what):
    contents = make_repo(tmp_path / "hub")
    dest = tmp_path / "out" / "ds"
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server:
        server.corrupt.add(rel)
        with pytest.raises(ChecksumError, match=f"^ds/{rel}: {what}") as err:
            download_hub_dataset(hub(server), dest, headers={})
    assert len(server.file_requests(rel)) == 2, "fetched once more from scratch before giving up"
    quarantined = quarantine_dir_for(dest) / rel
    assert f"moved to {quarantined}" in str(err.value) and "\n" not in str(err.value)
    assert quarantined.read_bytes()[1:] == contents[rel][1:]
    assert not dest.exists() and not (staging_dir_for(dest) / rel).exists()


def test_a_size_other_than_the_listed_one_is_quarantined(tmp_path):
    contents = make_repo(tmp_path / "hub")
    dest = tmp_path / "out" / "ds"
    listed = len(contents[VALIDATION]) + 7
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server:
        server.sibling_changes = {VALIDATION: {"size": listed, "lfs": {"sha256": hashlib.sha256(contents[VALIDATION]).hexdigest(), "size": listed}}}
        with pytest.raises(
            ChecksumError, match=rf"^ds/{VALIDATION}: size mismatch after download: expected {listed} bytes, actual {len(contents[VALIDATION])} bytes"
        ):
            download_hub_dataset(hub(server), dest, headers={})
    assert (quarantine_dir_for(dest) / VALIDATION).is_file()


@pytest.mark.parametrize(
    ("pin", "message"),
    [
        ({"sha256": "0" * 64}, rf"^ds/{TRAIN}: the hub lists sha256 [0-9a-f]{{64}} at the pinned commit; the catalog pins 0{{64}}$"),
        ({"size": 5}, rf"^ds/{TRAIN}: the hub lists \d+ bytes at the pinned commit; the catalog pins size 5$"),
    ],
)
def test_catalog_pins_the_hub_contradicts_fail_before_any_download(tmp_path, pin, message):
    make_repo(tmp_path / "hub")
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server, pytest.raises(ChecksumError, match=message):
        download_hub_dataset(hub(server), tmp_path / "out" / "ds", pinned=[DatasetFile(path=TRAIN, **pin)], headers={})
    assert all(r.path.startswith("/api/") for r in server.requests)


def test_pinned_sha256_of_a_git_file_is_checked_on_its_bytes(tmp_path):
    make_repo(tmp_path / "hub")
    dest = tmp_path / "out" / "ds"
    with (
        HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server,
        pytest.raises(ChecksumError, match=r"^ds/README\.md: sha256 mismatch after download: expected 0{64}"),
    ):
        download_hub_dataset(hub(server), dest, pinned=[DatasetFile(path="README.md", sha256="0" * 64)], headers={})
    assert (quarantine_dir_for(dest) / "README.md").is_file()


def test_pinned_rows_are_counted_and_a_mismatch_is_quarantined(tmp_path):
    make_repo(tmp_path / "hub")
    right = [DatasetFile(path=TRAIN, rows=tiny_hub_repo.TRAIN_ROWS), DatasetFile(path=VALIDATION, rows=tiny_hub_repo.VALIDATION_ROWS)]
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server:
        download_hub_dataset(hub(server), tmp_path / "out" / "good", pinned=right, headers={})
        for rel, rows in ((TRAIN, tiny_hub_repo.TRAIN_ROWS), (VALIDATION, tiny_hub_repo.VALIDATION_ROWS)):
            dest = tmp_path / "out" / f"bad-{Path(rel).suffix[1:]}"
            with pytest.raises(ChecksumError, match=rf"^{dest.name}/{rel}: rows mismatch after download: expected {rows + 1}, actual {rows}; moved to "):
                download_hub_dataset(hub(server), dest, pinned=[DatasetFile(path=rel, rows=rows + 1)], headers={})
            assert (quarantine_dir_for(dest) / rel).is_file() and not dest.exists()
            assert "README.md" in staged(dest), "the files that passed stay staged"


def test_exclude_globs_of_the_catalog_apply(tmp_path):
    make_repo(tmp_path / "hub", big_bytes=1000)
    definition = DatasetDef.model_validate(
        {
            "id": "ds",
            "version": "1",
            "title": "t",
            "license": "test",
            "exclude": ["weights/*", "*.md"],
            "source": {"protocol": "huggingface", "repository": REPO, "revision": COMMIT},
        }
    )
    dest = tmp_path / "out" / "ds"
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server:
        download_hub_dataset(hub(server), dest, wanted=definition.wanted, headers={})
    assert sorted(p.relative_to(dest).as_posix() for p in (dest / "data").rglob("*")) == [TRAIN, VALIDATION]
    assert not (dest / "README.md").exists() and not server.file_requests("weights/model.bin")
    assert not any(fnmatch.fnmatch(r.path, "*README.md") for r in server.requests)


def test_tiny_mirror_in_the_hub_layout_is_read_through_file_urls(tmp_path, monkeypatch):
    definition = DatasetDef.model_validate(
        {
            "id": "ds",
            "version": "1",
            "title": "t",
            "license": "test",
            "source": {"protocol": "huggingface", "repository": REPO, "repository_type": "dataset", "revision": COMMIT},
            "tiny": {"module": "tests.tiny_hub_repo", "seed": 11},
        }
    )
    mirror = tmp_path / "mirror"
    paths = generate_tiny_mirror(definition, mirror)
    assert paths.listing == mirror / "api" / "datasets" / REPO / "revision" / COMMIT
    assert paths.data == mirror / "datasets" / REPO / "resolve" / COMMIT
    listing = json.loads(paths.listing.read_text())
    assert listing["sha"] == COMMIT
    siblings = {s["rfilename"]: s for s in listing["siblings"]}
    readme = (paths.data / "README.md").read_bytes()
    assert siblings["README.md"] == {"rfilename": "README.md", "size": len(readme), "blobId": git_blob_id(readme)}
    if shutil.which("git"):
        hashed = subprocess.run(["git", "hash-object", str(paths.data / "README.md")], capture_output=True, text=True, check=True).stdout.strip()
        assert hashed == siblings["README.md"]["blobId"]
    train = (paths.data / TRAIN).read_bytes()
    assert siblings[TRAIN]["lfs"] == {"sha256": hashlib.sha256(train).hexdigest(), "size": len(train), "pointerSize": siblings[TRAIN]["lfs"]["pointerSize"]}
    dest = tmp_path / "out" / "ds"
    record = download_hub_dataset(HubRepo(mirror.as_uri(), REPO, "dataset", COMMIT), dest, headers={})
    assert (dest / TRAIN).read_bytes() == train and record.commit == COMMIT
    # A relative file: endpoint, as the workflow's tiny download rule passes it.
    monkeypatch.chdir(tmp_path)
    download_hub_dataset(HubRepo("file:mirror", REPO, "dataset", COMMIT), tmp_path / "out" / "again", headers={})
    assert (tmp_path / "out" / "again" / TRAIN).read_bytes() == train


def test_cli_errors_are_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for argv, expected in [
        (["--repository", REPO, "--revision", "main"], "revision 'main': expected a full 40-hex commit"),
        (["--dataset", "r2e_gym_subset", "--uri", "file:x.uri"], "--uri/--md5 are R2 flags"),
        (["--dataset", "scrolls_gov_report_8k", "--revision", COMMIT], "are hub flags; scrolls_gov_report_8k is protocol r2"),
        (["--endpoint", "file:/nonexistent", "--repository", REPO, "--revision", COMMIT], "/nonexistent/api/datasets/acme/tiny-tasks/revision/"),
    ]:
        proc = subprocess.run(
            [sys.executable, "-m", "mlperf_wf", "--root", str(ROOT), "download", "--dest", str(tmp_path / "d"), *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=False,
        )
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], proc.stderr


def test_a_branch_as_revision_is_a_schema_error_that_reads_well(tmp_path):
    from mlperf_wf.config.registry import _validated

    data = {"id": "x", "version": "1", "title": "t", "license": "l", "source": {"protocol": "huggingface", "repository": REPO, "revision": "main"}}
    with pytest.raises(ConfigError) as err:
        _validated(Path("config/datasets/x.yaml"), DatasetDef, data)
    assert str(err.value) == (
        "config/datasets/x.yaml: source.revision: expected the full 40-hex commit the reference pins (a branch or tag could change under a result) (got 'main')"
    )


def test_the_download_rule_gets_the_source_of_either_protocol_at_either_scale(tmp_path, monkeypatch):
    from tests.plan.test_plan import make_plan

    monkeypatch.chdir(ROOT)
    tiny, full = make_plan(tmp_path), make_plan(tmp_path, scale="full")
    assert tiny.download_source_args("r2e_gym_subset") == "--endpoint file:resources/tiny/mirror/r2e_gym_subset"
    assert full.download_source_args("r2e_gym_subset") == "--endpoint https://huggingface.co --revision e8b9fcbce43eaca0dc2c0d4798ee6f3e965f590a"
    assert full.download_source_args("qwen35_397b_a17b_checkpoint").endswith("--revision 8472618112abcbd45acbcdc58436aff4233c23f7")
    metadata = "file:resources/tiny/mirror/scrolls_gov_report_8k/metadata/scrolls_gov_report_8k"
    assert tiny.download_source_args("scrolls_gov_report_8k") == f"--uri {metadata}.uri --md5 {metadata}.md5"
    assert full.download_source_args("scrolls_gov_report_8k").startswith("--uri https://llama2.mlcommons-storage.org/")


def test_a_hub_dataset_goes_through_the_tiny_dag_mirror_download_verify(tmp_path):
    """The workflow's own rules on a catalog entry with a test-local generator: mirror, download, verify."""
    workdir = tmp_path / "work"
    shutil.copytree(ROOT / "config", workdir / "config")
    entry = {
        "id": "hub_test_repo",
        "version": COMMIT,
        "title": "test repository",
        "license": "test data",
        "source": {"protocol": "huggingface", "repository": REPO, "revision": COMMIT},
        "tiny": {"module": "tests.tiny_hub_repo", "seed": 5},
    }
    (workdir / "config" / "datasets" / "hub_test_repo.yaml").write_text(json.dumps(entry))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = f"{ROOT / 'src'}{os.pathsep}{ROOT}"
    env.update({"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""})
    target = "resources/tiny/verified/hub_test_repo.json"
    argv = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "-d", str(workdir), "--cores", "1", target]
    dry = subprocess.run([*argv, "-n", "-p"], capture_output=True, text=True, env=env, check=False)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    from tests.workflow.test_workflow import unwrapped

    assert "--endpoint file:resources/tiny/mirror/hub_test_repo" in unwrapped(dry.stdout)
    run = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    record = json.loads((workdir / target).read_text())
    assert sorted(f["path"] for f in record["files"]) == ["README.md", TRAIN, VALIDATION]
    downloaded = json.loads((workdir / "resources/tiny/datasets/hub_test_repo/download.json").read_text())
    assert downloaded["commit"] == COMMIT and downloaded["uri"].startswith("file:resources/tiny/mirror/hub_test_repo/api/datasets/")


def test_a_gated_repository_says_to_set_hf_token_and_never_prints_it(tmp_path):
    make_repo(tmp_path / "hub")
    # A mirror's endpoint gets the token only where the allowlist names its host.
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_TOKEN": "hf_do_not_print", "MLPERF_WF_HF_TOKEN_HOSTS": "127.0.0.1"}
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server:
        server.faults = {"<listing>": ["401"]}
        argv = ["--endpoint", server.endpoint, "--repository", REPO, "--revision", COMMIT, "--dest", str(tmp_path / "out" / "ds")]
        proc = subprocess.run([sys.executable, "-m", "mlperf_wf", "download", *argv], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.strip().endswith("HTTP 401 (expected 200); a gated or private repository needs HF_TOKEN set to a token with access")
    assert "hf_do_not_print" not in proc.stdout + proc.stderr
    assert server.requests[0].headers.get("Authorization") == "Bearer hf_do_not_print"


def test_a_staged_file_of_another_commit_is_quarantined_and_fetched_again(tmp_path):
    """A rerun after the pinned commit changed must not reuse a file an earlier run staged for the old one."""
    contents = make_repo(tmp_path / "hub")
    dest = tmp_path / "out" / "ds"
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server:
        server.faults = {VALIDATION: ["404"]}
        with pytest.raises(DownloadError):
            download_hub_dataset(hub(server), dest, headers={}, jobs=1)
        (staging_dir_for(dest) / TRAIN).write_bytes(b"the old commit's bytes")
        first_run = len(server.requests)
        download_hub_dataset(hub(server), dest, headers={})
        rerun = server.requests[first_run:]
    assert (dest / TRAIN).read_bytes() == contents[TRAIN]
    assert (quarantine_dir_for(dest) / TRAIN).read_bytes() == b"the old commit's bytes"
    assert not [r for r in rerun if r in server.file_requests("README.md")], "a staged file that passes its checks is kept"


@pytest.mark.parametrize("cut", [0, 2])
def test_a_listing_cut_short_is_replaced_by_the_paginated_tree(tmp_path, monkeypatch, cut):
    """The hub's caches may cut ``siblings`` short in large repositories: from LARGE_LISTING files on, or none, the tree decides."""
    monkeypatch.setattr("mlperf_wf.acquire.hub.LARGE_LISTING", 2)
    contents = make_repo(tmp_path / "hub", big_bytes=100)
    dest = tmp_path / "out" / "ds"
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server:
        server.siblings_cut, server.tree_page = cut, 2
        record = download_hub_dataset(hub(server), dest, headers=hub_auth_headers({"HF_TOKEN": "t"}), catalog_endpoint=server.endpoint)
    pages = [r for r in server.requests if "/tree/" in r.path]
    assert len(pages) == 3 and pages[-1].path.endswith("cursor=4"), "4 files and 2 folders, 2 entries a page"
    assert all(r.headers.get("Authorization") == "Bearer t" for r in pages)
    assert sorted(record.files) == sorted(contents) and all((dest / rel).read_bytes() == data for rel, data in contents.items())


def test_rows_pinned_on_a_file_that_is_no_parquet_fail_in_one_line(tmp_path):
    make_repo(tmp_path / "hub")
    (tmp_path / "hub" / "data" / "ds" / "data" / "broken.parquet").write_bytes(b"not parquet at all")
    dest = tmp_path / "out" / "ds"
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as server, pytest.raises(ChecksumError) as err:
        download_hub_dataset(hub(server), dest, pinned=[DatasetFile(path="data/broken.parquet", rows=3)], headers={})
    assert str(err.value).startswith("ds/data/broken.parquet: rows mismatch after download: expected 3, actual unreadable (")
    assert "\n" not in str(err.value) and (quarantine_dir_for(dest) / "data" / "broken.parquet").is_file()
