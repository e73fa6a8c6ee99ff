"""R2 download: protocol, resume after kill -9, checksum failures, errors."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.acquire.download import auth_headers, download_dataset, download_url_list, parse_manifest, staging_dir_for
from mlperf_wf.acquire.mirror import publish
from mlperf_wf.errors import ChecksumError, DownloadError
from tests.r2server import R2Server, kill_mid_file

ROOT = Path(__file__).resolve().parents[2]


def make_bucket(root: Path, name: str, sizes: dict[str, int]) -> dict[str, bytes]:
    folder = root / "data" / name
    folder.mkdir(parents=True)
    contents = {}
    for i, (rel, size) in enumerate(sizes.items()):
        data = (hashlib.sha256(str(i).encode()).digest() * (size // 32 + 1))[:size]
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
        contents[rel] = data
    return contents


def test_parse_manifest_accepts_md5sum_format_and_rejects_garbage():
    text = "d41d8cd98f00b204e9800998ecf8427e  a/b.bin\n\nD41D8CD98F00B204E9800998ECF8427E *./c.bin\n"
    entries = parse_manifest(text, "x.md5")
    assert [(e.md5, e.path) for e in entries] == [("d41d8cd98f00b204e9800998ecf8427e", "a/b.bin"), ("d41d8cd98f00b204e9800998ecf8427e", "c.bin")]
    with pytest.raises(DownloadError, match=r"x\.md5:2: not an 'md5  path' line"):
        parse_manifest("d41d8cd98f00b204e9800998ecf8427e  ok\nnot a line\n", "x.md5")
    with pytest.raises(DownloadError, match="leaves the dataset folder"):
        parse_manifest("d41d8cd98f00b204e9800998ecf8427e  ../../etc/passwd\n", "x.md5")


def test_http_download_places_files_and_manifest(tmp_path):
    contents = make_bucket(tmp_path / "bucket", "ds", {"train.parquet": 300_000, "sub/val.parquet": 1000})
    dest = tmp_path / "out" / "ds"
    with R2Server(tmp_path / "bucket", "ds") as server:
        record = download_dataset(server.uri_url, server.md5_url, dest, headers={})
    for rel, data in contents.items():
        assert (dest / rel).read_bytes() == data
    assert (dest / "manifest.md5").read_text().count("\n") == 2
    assert record.bytes_transferred == sum(len(d) for d in contents.values())
    assert not staging_dir_for(dest).exists()


def test_file_url_download_reads_a_local_mirror(tmp_path):
    make_bucket(tmp_path / "mirror", "ds", {"a.bin": 5000})
    paths = publish(tmp_path / "mirror", "ds", tmp_path / "mirror" / "data" / "ds")
    dest = tmp_path / "out" / "ds"
    download_dataset(paths.uri.as_uri(), paths.md5.as_uri(), dest, headers={})
    assert (dest / "a.bin").stat().st_size == 5000


def test_corrupt_transfer_fails_naming_file_and_both_md5s_and_keeps_nothing_in_place(tmp_path):
    contents = make_bucket(tmp_path / "bucket", "ds", {"good.bin": 1000, "bad.bin": 2000})
    dest = tmp_path / "out" / "ds"
    with R2Server(tmp_path / "bucket", "ds") as server:
        server.corrupt.add("bad.bin")
        with pytest.raises(ChecksumError) as err:
            download_dataset(server.uri_url, server.md5_url, dest, headers={})
    expected = hashlib.md5(contents["bad.bin"]).hexdigest()
    assert "bad.bin" in str(err.value) and f"expected {expected}" in str(err.value) and "actual " in str(err.value)
    assert not dest.exists()


def test_http_errors_are_reported_with_url_and_status(tmp_path):
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 10})
    with R2Server(tmp_path / "bucket", "ds") as server, pytest.raises(DownloadError, match=r"nope\.uri: HTTP 404"):
        download_dataset(f"{server.base}/metadata/nope.uri", server.md5_url, tmp_path / "out", headers={})


def test_pinned_md5_mismatch_in_published_list_is_refused(tmp_path):
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 10})
    with R2Server(tmp_path / "bucket", "ds") as server, pytest.raises(ChecksumError, match=r"pins 0{32}"):
        download_dataset(server.uri_url, server.md5_url, tmp_path / "out" / "ds", pinned_md5={"a.bin": "0" * 32}, headers={})


def test_auth_headers_come_from_environment_only():
    env = {"MLPERF_WF_CF_ACCESS_CLIENT_ID": "id.access", "MLPERF_WF_CF_ACCESS_CLIENT_SECRET": "s3cret"}
    assert auth_headers(env).headers == {"CF-Access-Client-Id": "id.access", "CF-Access-Client-Secret": "s3cret"}
    assert auth_headers({}).headers == {}
    assert auth_headers(env).for_url("https://llama2.mlcommons-storage.org/data/x") == auth_headers(env).headers
    assert auth_headers(env).for_url("https://mlcommons-storage.org.evil.example/x") == {}
    assert auth_headers({**env, "MLPERF_WF_CF_ACCESS_HOSTS": "mirror.site:8443"}).for_url("https://mirror.site:8443/d") != {}


def test_r2_credentials_never_reach_a_host_only_the_uri_file_names(tmp_path, caplog):
    """The .uri is fetched content: a base URL on another host (here another loopback port) gets the files'
    requests without the service-token headers, and the log says so in one line; the catalog's host gets them."""
    contents = make_bucket(tmp_path / "bucket", "ds", {"a.bin": 3000})
    secret = "s3cret-value"
    env = {"MLPERF_WF_CF_ACCESS_CLIENT_ID": "id.access", "MLPERF_WF_CF_ACCESS_CLIENT_SECRET": secret, "MLPERF_WF_CF_ACCESS_TOKEN": "tok3n"}
    dest = tmp_path / "out" / "ds"
    with R2Server(tmp_path / "bucket", "ds") as catalog_host, R2Server(tmp_path / "bucket", "ds") as other_host:
        catalog_host.data_base = f"{other_host.base}/data/ds"
        download_dataset(catalog_host.uri_url, catalog_host.md5_url, dest, headers=auth_headers(env), catalog_urls=(catalog_host.uri_url,))
    assert (dest / "a.bin").read_bytes() == contents["a.bin"]
    assert other_host.requests and all(not {"CF-Access-Client-Id", "CF-Access-Client-Secret", "cf-access-token"} & set(r.headers) for r in other_host.requests)
    assert all(r.headers.get("CF-Access-Client-Secret") == secret for r in catalog_host.requests)
    warnings = [r.getMessage() for r in caplog.records if "not sending" in r.getMessage()]
    assert len(warnings) == 1 and "MLPERF_WF_CF_ACCESS_HOSTS" in warnings[0] and secret not in warnings[0]
    assert not any(secret in path.read_text(errors="replace") for path in dest.rglob("*") if path.is_file())


def test_kill_mid_file_then_rerun_resumes_from_bytes_on_disk(tmp_path):
    """kill -9 during a download; the rerun fetches only the missing bytes (counted by the server)."""
    sizes = {"a_small.bin": 100_000, "b_big.bin": 4_000_000}
    contents = make_bucket(tmp_path / "bucket", "ds", sizes)
    dest = tmp_path / "out" / "ds"
    part = staging_dir_for(dest) / "b_big.bin.part"
    command = [sys.executable, "-m", "mlperf_wf", "--root", str(ROOT), "download", "--dataset", "scrolls_gov_report_8k", "--dest", str(dest)]
    with R2Server(tmp_path / "bucket", "ds", chunk=32 * 1024, delay=0.02) as server:
        command += ["--uri", server.uri_url, "--md5", server.md5_url]
        on_disk = kill_mid_file(command, part, sizes["b_big.bin"])
        assert (staging_dir_for(dest) / "a_small.bin").is_file(), "the completed file stays in staging"
        assert not dest.exists(), "nothing is moved into place before the dataset is complete"

        server.delay = 0.0
        first_run = len(server.requests)  # the killed connection's thread may still be counting
        subprocess.run(command, check=True, capture_output=True)
        rerun = server.requests[first_run:]

    big = [r for r in rerun if r.path == "/data/ds/b_big.bin"]
    assert [r.headers.get("Range") for r in big] == [f"bytes={on_disk}-"]
    assert sum(r.sent for r in big) == sizes["b_big.bin"] - on_disk
    assert not [r for r in rerun if r.path == "/data/ds/a_small.bin"], "a completed file is not downloaded again"
    for rel, data in contents.items():
        assert (dest / rel).read_bytes() == data


@pytest.mark.parametrize("fault", ["reset", "truncate", "short-length", "500", "503", "flip", "slow"])
def test_each_transient_fault_is_retried_and_the_dataset_is_intact(tmp_path, fault):
    contents = make_bucket(tmp_path / "bucket", "ds", {"a.bin": 300_000, "b.bin": 200_000})
    dest = tmp_path / "out" / "ds"
    with R2Server(tmp_path / "bucket", "ds", chunk=16 * 1024) as server:
        # A corrupting fault costs a whole refetch, which is done once; connection faults resume and may repeat.
        repeats = 1 if fault in ("flip", "short-length") else 2
        server.faults = {"a.bin": [fault], "b.bin": [fault] * repeats}
        download_dataset(server.uri_url, server.md5_url, dest, headers={}, backoff=0.01, jobs=2)
    for rel, data in contents.items():
        assert (dest / rel).read_bytes() == data, f"{rel} after {fault}"
    assert sorted(p.name for p in dest.iterdir()) == [".mlperf-wf-stamps.json", "a.bin", "b.bin", "download.json", "manifest.md5"]


@pytest.mark.parametrize(
    ("fault", "error", "message"),
    [
        ("404", DownloadError, r"a\.bin: HTTP 404 \(expected 200 or 206\); not retried"),
        ("503", DownloadError, r"a\.bin: HTTP 503; gave up after 4 attempts"),
        ("reset", DownloadError, r"a\.bin: .*gave up after 4 attempts, \d+ bytes kept for the next run"),
        ("flip", ChecksumError, r"a\.bin: md5 mismatch after download: expected [0-9a-f]{32}, actual [0-9a-f]{32}"),
    ],
)
def test_persistent_faults_are_reported_and_nothing_corrupt_is_placed(tmp_path, fault, error, message):
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 100_000})
    dest = tmp_path / "out" / "ds"
    with R2Server(tmp_path / "bucket", "ds", chunk=16 * 1024) as server:
        server.faults = {"a.bin": [fault] * 10}
        with pytest.raises(error, match=message):
            download_dataset(server.uri_url, server.md5_url, dest, headers={}, retries=3, backoff=0.01)
    assert not dest.exists()
    assert not (staging_dir_for(dest) / "a.bin").exists()


def test_a_listed_file_without_md5_is_downloaded_and_its_md5_recorded(tmp_path):
    """Criteo's published list names train_data.bin without a checksum; the download must not stop there."""
    contents = make_bucket(tmp_path / "bucket", "ds", {"a.bin": 1000, "train_data.bin": 5000})
    dest = tmp_path / "out" / "ds"
    with R2Server(tmp_path / "bucket", "ds") as server:
        server.md5_text = f"{hashlib.md5(contents['a.bin']).hexdigest()}  a.bin\n                                  train_data.bin\n"
        record = download_dataset(server.uri_url, server.md5_url, dest, headers={})
    assert record.unchecked == ["train_data.bin"]
    assert f"{hashlib.md5(contents['train_data.bin']).hexdigest()}  train_data.bin" in (dest / "manifest.md5").read_text()


def test_url_list_download(tmp_path):
    contents = make_bucket(tmp_path / "bucket", "ds", {"x.bin": 2000, "y.bin": 3000})
    with R2Server(tmp_path / "bucket", "ds") as server:
        listing = tmp_path / "urls.txt"
        listing.write_text(f"# two files\n{hashlib.md5(contents['x.bin']).hexdigest()}  {server.base}/data/ds/x.bin\n{server.base}/data/ds/y.bin\n")
        record = download_url_list(listing, tmp_path / "out" / "ds", headers={})
    assert sorted(record.files) == ["x.bin", "y.bin"]
    assert (tmp_path / "out" / "ds" / "y.bin").read_bytes() == contents["y.bin"]


def test_verify_right_after_download_reads_nothing_again(tmp_path):
    from mlperf_wf.acquire.verify import verify_dataset

    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 200_000, "b.bin": 100_000})
    dest = tmp_path / "out" / "ds"
    with R2Server(tmp_path / "bucket", "ds") as server:
        download_dataset(server.uri_url, server.md5_url, dest, headers={})
    record = verify_dataset(dest, stamps_file=tmp_path / "stamps.json")
    assert record.bytes_hashed == 0, "the md5s computed while streaming are reused"
    (dest / "a.bin").write_bytes(b"changed")
    with pytest.raises(ChecksumError, match=r"ds/a\.bin: md5 mismatch"):
        verify_dataset(dest, stamps_file=tmp_path / "stamps.json")


class SignInR2Server(R2Server):
    """R2 behind Cloudflare Access: a request without a valid token is sent to the sign-in page."""

    def _redirect(self, path: str) -> str | None:
        return "https://mlcommons.cloudflareaccess.com/cdn-cgi/access/login" if path.endswith(".uri") else None


@pytest.mark.parametrize(
    ("server_class", "fault", "env", "said"),
    [
        (R2Server, "403", {}, "HTTP 403 (expected 200): access refused: none of MLPERF_WF_CF_ACCESS_CLIENT_ID with MLPERF_WF_CF_ACCESS_CLIENT_SECRET"),
        (R2Server, "401", {"MLPERF_WF_CF_ACCESS_TOKEN": "tok3n"}, "HTTP 401 (expected 200): access refused: the MLPERF_WF_CF_ACCESS_* credentials were sent"),
        (SignInR2Server, None, {}, "HTTP 302 (expected 200) to https://mlcommons.cloudflareaccess.com/cdn-cgi/access/login: access refused: none of"),
    ],
)
def test_a_refusal_names_the_credentials_to_set_and_the_catalog_s_access_note(tmp_path, monkeypatch, capsys, server_class, fault, env, said):
    """R2 refuses members-only data without a Cloudflare Access token (401, 403, or a redirect to its sign-in page): the
    line says which credentials the request carried and which variables give them, then what the catalog says of
    the dataset's access."""
    from mlperf_wf import cli
    from mlperf_wf.config.registry import load_dataset

    for variable in ("MLPERF_WF_CF_ACCESS_CLIENT_ID", "MLPERF_WF_CF_ACCESS_CLIENT_SECRET", "MLPERF_WF_CF_ACCESS_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 100})
    with server_class(tmp_path / "bucket", "ds") as server:
        server.faults = {"/metadata/ds.uri": [fault]} if fault else {}
        monkeypatch.setenv("MLPERF_WF_CF_ACCESS_HOSTS", server.base.split("//")[1])
        status = cli.main(["download", "--dataset", "scrolls_gov_report_8k", "--uri", server.uri_url, "--dest", str(tmp_path / "out")])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert status != 0 and said in line, line
    assert line.endswith(f"scrolls_gov_report_8k's access, as the catalog says: {load_dataset('scrolls_gov_report_8k').license}"), line
    assert "tok3n" not in line


def test_a_truncated_body_says_how_many_bytes_came_and_keeps_them(tmp_path):
    """A connection closed halfway through a file smaller than one read: the line names the bytes that came (they are
    kept for the next run), not 0."""
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 100_000})
    dest = tmp_path / "out" / "ds"
    with R2Server(tmp_path / "bucket", "ds") as server:
        server.faults = {"a.bin": ["truncate"]}
        with pytest.raises(DownloadError) as err:
            download_dataset(server.uri_url, server.md5_url, dest, headers={}, retries=0)
    assert "after 50000 of 100000 bytes" in str(err.value) and "50000 bytes kept for the next run" in str(err.value), err.value
    assert (staging_dir_for(dest) / "a.bin.part").stat().st_size == 50_000
