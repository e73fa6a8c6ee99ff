"""Credentials reach only the hosts the catalog entry or the allowlist names, on every path; URL passwords stay hidden."""

from __future__ import annotations

import json

import pytest

from mlperf_wf import cli
from mlperf_wf.acquire.download import Expected, RemoteFile, Transport, auth_headers, download_dataset, download_file
from tests.acquire.test_download import make_bucket
from tests.acquire.test_download_hf import COMMIT, REPO, make_repo
from tests.hfserver import HubServer
from tests.r2server import R2Server

CF_HEADERS = {"cf-access-client-id", "cf-access-client-secret", "cf-access-token"}
CF_ENV = {"MLPERF_WF_CF_ACCESS_CLIENT_ID": "id.access", "MLPERF_WF_CF_ACCESS_CLIENT_SECRET": "s3cret-value", "MLPERF_WF_CF_ACCESS_TOKEN": "tok3n"}


def carried(server: R2Server, names: set[str]) -> list[str]:
    """Paths of the requests ``server`` got with any of the header ``names``."""
    return [r.path for r in server.requests if names & {name.lower() for name in r.headers}]


@pytest.fixture
def clean_env(monkeypatch):
    for variable in (*CF_ENV, "MLPERF_WF_CF_ACCESS_HOSTS", "HF_TOKEN", "MLPERF_WF_HF_TOKEN_HOSTS"):
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def test_uri_to_a_host_neither_the_catalog_nor_the_allowlist_names_gets_no_r2_headers(tmp_path, clean_env, capsys):
    for variable, value in CF_ENV.items():
        clean_env.setenv(variable, value)
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 3000})
    with R2Server(tmp_path / "bucket", "ds") as other_host:
        for argv in (["--dataset", "scrolls_gov_report_8k"], []):
            status = cli.main(["download", *argv, "--uri", other_host.uri_url, "--dest", str(tmp_path / "out" / str(len(argv)))])
            assert status == 0, capsys.readouterr().err
    assert other_host.requests and carried(other_host, CF_HEADERS) == []


def test_an_allowlisted_uri_host_gets_the_r2_headers(tmp_path, clean_env):
    for variable, value in CF_ENV.items():
        clean_env.setenv(variable, value)
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 3000})
    with R2Server(tmp_path / "bucket", "ds") as mirror:
        clean_env.setenv("MLPERF_WF_CF_ACCESS_HOSTS", mirror.base.split("//")[1])
        assert cli.main(["download", "--uri", mirror.uri_url, "--dest", str(tmp_path / "out")]) == 0
    assert len(carried(mirror, CF_HEADERS)) == len(mirror.requests) == 3


def test_endpoint_to_another_host_gets_no_hub_token(tmp_path, clean_env, capsys):
    clean_env.setenv("HF_TOKEN", "hf_do_not_send")
    make_repo(tmp_path / "hub")
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as mirror:
        status = cli.main(["download", "--endpoint", mirror.endpoint, "--repository", REPO, "--revision", COMMIT, "--dest", str(tmp_path / "out")])
        assert status == 0, capsys.readouterr().err
    assert mirror.requests and carried(mirror, {"authorization"}) == []


def test_each_redirect_hop_gets_the_credentials_of_its_own_host_only(tmp_path):
    """requests keeps custom headers (CF-Access-*) on a redirect to another host: each hop is decided again."""
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 3000})
    with R2Server(tmp_path / "bucket", "ds") as elsewhere:

        class Redirecting(R2Server):
            def _redirect(self, path: str) -> str | None:
                return f"{elsewhere.base}{path}" if path.startswith("/data/") else None

        with Redirecting(tmp_path / "bucket", "ds") as catalog_host:
            credentials = auth_headers(CF_ENV).allowing(catalog_host.uri_url)
            url = f"{catalog_host.base}/data/ds/a.bin"
            download_file(RemoteFile("a.bin", url, Expected()), tmp_path / "out" / "ds", Transport(credentials, follow_redirects=True))
    assert carried(catalog_host, CF_HEADERS) == ["/data/ds/a.bin"]
    assert elsewhere.requests and carried(elsewhere, CF_HEADERS) == []


def test_a_redirect_is_not_called_a_refusal_and_says_where_credentials_went(tmp_path, clean_env, capsys):
    for variable, value in CF_ENV.items():
        clean_env.setenv(variable, value)
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 100})

    class Moved(R2Server):
        def _redirect(self, path: str) -> str | None:
            return "http://localhost:9/metadata/ds.uri" if path.endswith(".uri") else None

    with Moved(tmp_path / "bucket", "ds") as server:
        host = server.base.split("//")[1]
        clean_env.setenv("MLPERF_WF_CF_ACCESS_HOSTS", host)
        status = cli.main(["download", "--uri", server.uri_url, "--dest", str(tmp_path / "out")])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert status != 0 and "HTTP 302 (expected 200) to http://localhost:9/metadata/ds.uri: not followed" in line, line
    assert f"credentials were sent to {host}, which answered with a redirect" in line and "and refused" not in line, line


def test_redact_hides_user_info_of_every_url_in_a_text():
    from mlperf_wf.acquire.credentials import redact

    assert redact("a http://u:p%40ss@h:1/x and https://tok@h/y, file:///p") == "a http://***@h:1/x and https://***@h/y, file:///p"


def test_a_password_in_a_url_is_never_printed(tmp_path, clean_env, capsys):
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 100})
    with R2Server(tmp_path / "bucket", "ds") as server:
        server.faults = {"/metadata/ds.uri": ["404"]}
        url = server.uri_url.replace("//", "//user:pa55word@")
        status = cli.main(["download", "--uri", url, "--dest", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status != 0 and "HTTP 404" in err and "pa55word" not in err and "//***@127.0.0.1" in err, err


def test_a_password_in_a_url_is_never_stored(tmp_path):
    make_bucket(tmp_path / "bucket", "ds", {"a.bin": 100})
    dest = tmp_path / "out" / "ds"
    with R2Server(tmp_path / "bucket", "ds") as server:
        server.data_base = f"{server.base}/data/ds".replace("//", "//reader:base-pa55@")
        download_dataset(server.uri_url.replace("//", "//user:pa55word@"), server.md5_url, dest, headers={})
    record = json.loads((dest / "download.json").read_text())
    assert record["uri"] == server.uri_url.replace("//", "//***@") and record["base_url"] == f"{server.base}/data/ds".replace("//", "//***@")
    assert not any(word in p.read_text(errors="replace") for p in dest.rglob("*") if p.is_file() for word in ("pa55word", "base-pa55"))


def test_a_gated_answer_to_a_mirror_the_token_did_not_go_to_says_how_to_send_it(tmp_path, clean_env, capsys):
    clean_env.setenv("HF_TOKEN", "hf_do_not_send")
    make_repo(tmp_path / "hub")
    with HubServer(tmp_path / "hub", "ds", REPO, COMMIT) as mirror:
        mirror.faults = {"<listing>": ["401"]}
        status = cli.main(["download", "--endpoint", mirror.endpoint, "--repository", REPO, "--revision", COMMIT, "--dest", str(tmp_path / "out")])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    host = mirror.base.split("//")[1]
    assert status != 0 and f"HF_TOKEN is set but was not sent to {host}: add it to MLPERF_WF_HF_TOKEN_HOSTS" in line, line
    assert "hf_do_not_send" not in line
