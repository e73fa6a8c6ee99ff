"""Hugging Face Hub downloads at a pinned commit, with the R2 path's guarantees (``download.py``).

The hub's layout, as ``huggingface_hub`` speaks it:

- listing: ``GET {endpoint}/api/{datasets|models}/{repo}/revision/{commit}?blobs=true`` answers
  ``{"sha": commit, "siblings": [{"rfilename", "size", "blobId", "lfs": {"sha256", "size"}}]}``; where
  ``siblings`` may be cut short (``LARGE_LISTING``), ``GET .../tree/{commit}?recursive=true`` pages
  (``Link: rel="next"``) of ``{"type", "path", "size", "oid", "lfs": {"oid", "size"}}`` list the files;
- file: ``GET {endpoint}/{datasets/}{repo}/resolve/{commit}/{path}`` (models have no prefix); the
  response (or the redirect to a CDN before it) names the commit it serves in ``X-Repo-Commit``.

Every file is checked against what the hub reports for the pinned commit: an LFS file's
``lfs.size`` and ``lfs.sha256``, a file kept in git its size and git blob id (sha1 of
``"blob <size>\\0"`` + content), and the catalog's ``files`` pins (sha256, size, md5, rows)
where given. The files are staged, resumed, fetched in parallel, quarantined and placed by
the same code as R2 datasets, and the folder gets the same md5 list, record and stamps, so
the verify stage treats both protocols alike. ``file://`` endpoints (the tiny tier's mirror)
are read through the same code.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests

from mlperf_wf.acquire.credentials import Credentials, hosts_from, origin, redact, redacting
from mlperf_wf.acquire.download import DownloadRecord, Expected, RemoteFile, Transport, fetch_files, fetch_pages, fetch_text, place_dataset, staging_dir_for
from mlperf_wf.acquire.verify import count_rows, quarantine_and_fail
from mlperf_wf.config.registry import DatasetFile
from mlperf_wf.errors import ChecksumError, ConfigError, DownloadError

TOKEN_ENV = "HF_TOKEN"
"""Environment variable holding a hub access token (gated or private repositories); sent as a Bearer token, never logged."""
COMMIT = re.compile(r"[0-9a-f]{40}")
LARGE_LISTING = 1000
"""From this many files on (or none), the revision listing's ``siblings`` may be cut short by the hub's caches
(huggingface_hub PRs #3122, #3565): the file list is then read from the commit's paginated tree instead."""


TOKEN_HOSTS_ENV = "MLPERF_WF_HF_TOKEN_HOSTS"
"""Comma-separated hosts ``HF_TOKEN`` may go to, besides the catalog's endpoint."""
TOKEN_HOSTS = ("huggingface.co", "*.huggingface.co", "hf.co", "*.hf.co")
"""The hub's own hosts (the default of ``TOKEN_HOSTS_ENV``)."""


def hub_auth_headers(environ: dict[str, str] | None = None) -> Credentials:
    """``Authorization: Bearer $HF_TOKEN`` where the variable is set, for the hub's hosts."""
    env = os.environ if environ is None else environ
    token = env.get(TOKEN_ENV)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Credentials(TOKEN_ENV, headers, hosts_from(env, TOKEN_HOSTS_ENV, TOKEN_HOSTS), TOKEN_HOSTS_ENV)


@dataclass(frozen=True)
class HubRepo:
    """A hub repository at a pinned commit."""

    endpoint: str
    """Base URL (https://huggingface.co, a mirror, or file://<root> of a local copy in the hub's layout)."""
    repository: str
    """``owner/name``."""
    repository_type: str
    """``dataset`` or ``model``."""
    revision: str
    """The pinned 40-hex commit."""

    def __post_init__(self) -> None:
        if not COMMIT.fullmatch(self.revision):
            raise ConfigError(f"{self.repository}: revision {self.revision!r}: expected a full 40-hex commit (a branch or tag could change under a result)")
        if self.repository_type not in ("dataset", "model"):
            raise ConfigError(f"{self.repository}: repository type {self.repository_type!r}: expected dataset or model")

    @property
    def listing_path(self) -> str:
        """Path of the file listing under the endpoint (without its ``?blobs=true`` query)."""
        return f"api/{self.repository_type}s/{self.repository}/revision/{self.revision}"

    @property
    def resolve_path(self) -> str:
        """Path under the endpoint that the repository's files hang from."""
        prefix = "datasets/" if self.repository_type == "dataset" else ""
        return f"{prefix}{self.repository}/resolve/{self.revision}"

    @property
    def tree_path(self) -> str:
        """Path of the commit's paginated file tree under the endpoint (without its ``?recursive=true`` query)."""
        return f"api/{self.repository_type}s/{self.repository}/tree/{self.revision}"

    @property
    def listing_url(self) -> str:
        return f"{self.endpoint.rstrip('/')}/{self.listing_path}?blobs=true"

    @property
    def base_url(self) -> str:
        return f"{self.endpoint.rstrip('/')}/{self.resolve_path}"


@dataclass(frozen=True)
class HubFile:
    """One file of the listing, with what the hub says it is."""

    path: str
    size: int
    blob_id: str
    """git blob id (of the LFS pointer, for an LFS file)."""
    lfs_sha256: str | None
    """sha256 of the content for an LFS file; None for a file kept in git."""

    def expected(self, pinned: DatasetFile | None) -> Expected:
        """The hub's values for this file, with the catalog's pins beside them (checked equal before downloading)."""
        pin = pinned or DatasetFile(path=self.path)
        if self.lfs_sha256:
            return Expected(md5=pin.md5, sha256=self.lfs_sha256, size=self.size, record_sha256=True)
        return Expected(md5=pin.md5, sha256=pin.sha256, git_blob=self.blob_id, size=self.size, record_sha256=True)


def _safe(path: object, where: str) -> str:
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in Path(path).parts:
        raise DownloadError(f"{where}: file name {path!r} leaves the dataset folder")
    return path


def _hub_file(entry: dict, where: str, names: tuple[str, str, str]) -> HubFile:
    """A listing entry as a HubFile; ``names`` are the entry's keys for the path, the blob id and the LFS sha256."""
    path_key, blob_key, sha_key = names
    path = _safe(entry.get(path_key), where)
    lfs = entry.get("lfs") or {}
    size = lfs.get("size", entry.get("size"))
    if not isinstance(size, int) or not entry.get(blob_key):
        raise DownloadError(f"{where}: {path} is listed without its size or {blob_key}")
    return HubFile(path, size, entry[blob_key], lfs.get(sha_key))


def parse_listing(text: str, repo: HubRepo, dataset: str) -> list[HubFile]:
    """The files of a listing answer; fails when it is not the pinned commit's or lacks sizes and hashes."""
    where = repo.listing_url
    try:
        listing = json.loads(text)
        commit, siblings = listing.get("sha"), listing["siblings"]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise DownloadError(f"{where}: not a hub listing (expected JSON with 'sha' and 'siblings')") from None
    if commit != repo.revision:
        raise DownloadError(f"{dataset}: {where} resolves revision {repo.revision} to commit {commit}; expected the pinned commit {repo.revision}")
    return [_hub_file(entry, where, ("rfilename", "blobId", "sha256")) for entry in siblings]


def tree_files(repo: HubRepo, headers: Credentials | dict[str, str], timeout: float = 60.0) -> list[HubFile]:
    """Every file of the commit's tree, page by page (the hub sends up to 1000 entries a page)."""
    url = f"{repo.endpoint.rstrip('/')}/{repo.tree_path}?recursive=true"
    files = []
    for page in fetch_pages(url, headers, timeout):
        try:
            entries = [entry for entry in json.loads(page) if entry["type"] == "file"]
        except (ValueError, KeyError, TypeError):
            raise DownloadError(f"{url}: not a hub tree page (expected a JSON list of entries with 'type')") from None
        files += [_hub_file(entry, url, ("path", "oid", "oid")) for entry in entries]
    return files


def check_pins(dataset: str, files: list[HubFile], pinned: dict[str, DatasetFile]) -> None:
    """Fail before downloading when the catalog pins a file the commit lacks, or a sha256/size the hub contradicts."""
    listed = {f.path: f for f in files}
    for path, pin in pinned.items():
        hub_file = listed.get(path)
        if hub_file is None:
            raise ChecksumError(f"{dataset}/{path}: pinned in the catalog's files but not in the repository at the pinned commit (or excluded)")
        if pin.size is not None and pin.size != hub_file.size:
            raise ChecksumError(f"{dataset}/{path}: the hub lists {hub_file.size} bytes at the pinned commit; the catalog pins size {pin.size}")
        if pin.sha256 and hub_file.lfs_sha256 and pin.sha256 != hub_file.lfs_sha256:
            raise ChecksumError(f"{dataset}/{path}: the hub lists sha256 {hub_file.lfs_sha256} at the pinned commit; the catalog pins {pin.sha256}")


def commit_check(dataset: str, revision: str) -> Callable[[requests.Response], None]:
    """A response check: every hop that names its commit (``X-Repo-Commit``) names the pinned one."""

    def check(response: requests.Response) -> None:
        for hop in (*response.history, response):
            served = hop.headers.get("X-Repo-Commit")
            if served and served != revision:
                path = urllib.parse.unquote(urllib.parse.urlparse(hop.url).path)
                raise DownloadError(f"{dataset}: {path} is served from commit {served}; expected the pinned commit {revision} (nothing kept from it)")

    return check


def _rows(path: Path) -> int | str:
    try:
        return count_rows(path)
    except ValueError as err:  # pyarrow's ArrowInvalid is one: a file that is not parquet
        return f"unreadable ({str(err).splitlines()[0]})"


def check_rows(dest: Path, pinned: dict[str, DatasetFile]) -> None:
    """Count the rows of every file the catalog pins rows for; quarantine those that differ and fail naming the first."""
    staging = staging_dir_for(dest)
    bad = [(path, pin.rows, _rows(staging / path)) for path, pin in pinned.items() if pin.rows is not None]
    bad = [(path, rows, actual) for path, rows, actual in bad if actual != rows]
    if bad:
        quarantine_and_fail(dest, staging, "rows mismatch after download", bad)


@redacting
def download_hub_dataset(
    repo: HubRepo,
    dest: Path,
    wanted: Callable[[str], bool] = lambda _path: True,
    pinned: list[DatasetFile] | None = None,
    headers: Credentials | dict[str, str] | None = None,
    jobs: int = 4,
    retries: int = 5,
    backoff: float = 1.0,
    timeout: float = 60.0,
    catalog_endpoint: str | None = None,
) -> DownloadRecord:
    """Download a hub repository at its pinned commit into ``dest``, ``jobs`` files at a time, resuming from the staging folder.

    The token goes to the host of ``catalog_endpoint`` (the catalog entry's) and its allowlist; not to the host of
    another endpoint given instead, nor to a host a redirect names unless it is one of those."""
    started = time.time()
    headers = hub_auth_headers() if headers is None else headers
    if isinstance(headers, Credentials) and catalog_endpoint:
        headers = headers.allowing(catalog_endpoint)
    try:
        text = fetch_text(repo.listing_url, headers, timeout, follow_redirects=True)
    except DownloadError as err:
        if re.search(r"HTTP 40[13]\b", str(err)):
            if isinstance(headers, Credentials) and headers.headers and not headers.allowed(repo.listing_url):
                host = origin(repo.listing_url)
                raise DownloadError(
                    f"{err}; {TOKEN_ENV} is set but was not sent to {host}: add it to {headers.hosts_variable} if it is meant to have it"
                ) from None
            raise DownloadError(f"{err}; a gated or private repository needs {TOKEN_ENV} set to a token with access") from None
        raise
    listed = parse_listing(text, repo, dest.name)
    if not 0 < len(listed) < LARGE_LISTING:
        listed = tree_files(repo, headers, timeout)
    files = [f for f in listed if wanted(f.path)]
    if not files:
        raise DownloadError(f"{repo.listing_url}: lists no files to download")
    pins = {pin.path: pin for pin in pinned or []}
    check_pins(dest.name, files, pins)
    remote = [RemoteFile(f.path, f"{repo.base_url}/{urllib.parse.quote(f.path)}", f.expected(pins.get(f.path))) for f in files]
    transport = Transport(headers, retries, backoff, timeout, follow_redirects=True, check_response=commit_check(dest.name, repo.revision))
    digests, transferred = fetch_files(remote, dest, transport, jobs)
    check_rows(dest, pins)
    record = DownloadRecord(
        uri=redact(repo.listing_url),
        base_url=redact(repo.base_url),
        files={path: d["md5"] for path, d in digests.items()},
        bytes_transferred=transferred,
        seconds=round(time.time() - started, 3),
        commit=repo.revision,
        sha256={path: d["sha256"] for path, d in digests.items()},
    )
    place_dataset(staging_dir_for(dest), dest, record)
    return record
