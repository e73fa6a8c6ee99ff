"""MLCommons R2 downloads: resumable, md5 computed while streaming, staged.

The R2 protocol (mlcommons/r2-downloader): ``<name>.uri`` holds the dataset's
base URL; ``<name>.md5`` beside it lists ``md5  relative/path`` lines; each
file is ``<base>/<relative/path>``.

Files land in a *staging* folder that Snakemake does not know about (it deletes
declared outputs before a job starts, so a declared folder could never resume).
A partial file is kept as ``<path>.part``; on rerun its bytes are hashed and the
download continues with an HTTP ``Range`` request. Only when every file is
complete and its md5 matches is the staging folder moved into place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import requests
from tqdm import tqdm

from mlperf_wf.errors import ChecksumError, DownloadError

log = logging.getLogger(__name__)

CHUNK = 1 << 20
MANIFEST_NAME = "manifest.md5"
RECORD_NAME = "download.json"
AUTH_ENV = {
    "CF-Access-Client-Id": "MLPERF_WF_CF_ACCESS_CLIENT_ID",
    "CF-Access-Client-Secret": "MLPERF_WF_CF_ACCESS_CLIENT_SECRET",
    "cf-access-token": "MLPERF_WF_CF_ACCESS_TOKEN",
}
"""Cloudflare Access headers taken from these environment variables; never logged."""


@dataclass(frozen=True)
class ManifestEntry:
    """One ``md5  path`` line of an R2 ``.md5`` list."""

    md5: str
    path: str


def auth_headers(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Non-interactive R2 auth headers from the environment."""
    env = os.environ if environ is None else environ
    return {header: env[var] for header, var in AUTH_ENV.items() if env.get(var)}


def parse_manifest(text: str, source: str) -> list[ManifestEntry]:
    """Parse ``md5  path`` lines (md5sum format); reject anything else by line number."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        digest, _, path = line.strip().partition(" ")
        path = path.strip().lstrip("*").removeprefix("./")
        if len(digest) != 32 or any(c not in "0123456789abcdef" for c in digest.lower()) or not path:
            raise DownloadError(f"{source}:{number}: not an 'md5  path' line: {line!r}")
        if path.startswith("/") or ".." in Path(path).parts:
            raise DownloadError(f"{source}:{number}: path {path!r} leaves the dataset folder")
        entries.append(ManifestEntry(md5=digest.lower(), path=path))
    return entries


def _is_file_url(url: str) -> bool:
    return urllib.parse.urlparse(url).scheme == "file"


def _file_url_path(url: str) -> Path:
    return Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))


def fetch_text(url: str, headers: dict[str, str], timeout: float = 60.0) -> str:
    """Read a small metadata file over https:// or file://."""
    if _is_file_url(url):
        path = _file_url_path(url)
        if not path.is_file():
            raise DownloadError(f"{url}: no such file")
        return path.read_text()
    try:
        response = requests.get(url, headers=headers, timeout=timeout, allow_redirects=False)
    except requests.RequestException as err:
        raise DownloadError(f"{url}: {type(err).__name__}: {err}") from None
    if response.status_code != 200:
        raise DownloadError(f"{url}: HTTP {response.status_code} (expected 200)")
    return response.text


def md5_of_prefix(path: Path) -> hashlib._Hash:
    """md5 state after the bytes already on disk, so a resumed download needs no second pass."""
    digest = hashlib.md5()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest


def _open_stream(url: str, offset: int, headers: dict[str, str], timeout: float) -> tuple[Iterator[bytes], int, bool]:
    """Open ``url`` from ``offset``; return (chunks, remaining length or -1, whether the server honoured the offset)."""
    if _is_file_url(url):
        path = _file_url_path(url)
        if not path.is_file():
            raise DownloadError(f"{url}: no such file")
        handle = path.open("rb")
        handle.seek(offset)

        def file_chunks() -> Iterator[bytes]:
            with handle:
                while chunk := handle.read(CHUNK):
                    yield chunk

        return file_chunks(), path.stat().st_size - offset, True
    request_headers = dict(headers)
    if offset:
        request_headers["Range"] = f"bytes={offset}-"
    response = requests.get(url, headers=request_headers, stream=True, timeout=timeout, allow_redirects=False)
    if response.status_code == 416 and offset:
        response.close()
        return iter(()), 0, True
    if response.status_code not in (200, 206):
        response.close()
        raise DownloadError(f"{url}: HTTP {response.status_code} (expected 200 or 206)")
    resumed = response.status_code == 206
    length = int(response.headers.get("Content-Length", -1))
    return response.iter_content(CHUNK), length, resumed


def download_file(
    url: str,
    target: Path,
    expected_md5: str,
    headers: dict[str, str],
    retries: int = 3,
    timeout: float = 60.0,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Download ``url`` to ``target`` via ``target.part``, resuming; return bytes transferred now."""
    part = target.with_name(target.name + ".part")
    part.parent.mkdir(parents=True, exist_ok=True)
    transferred = 0
    for attempt in range(retries + 1):
        offset = part.stat().st_size if part.exists() else 0
        digest = md5_of_prefix(part) if offset else hashlib.md5()
        try:
            chunks, _, resumed = _open_stream(url, offset, headers, timeout)
            if offset and not resumed:
                log.info("%s: server ignored Range; restarting from byte 0", url)
                offset, digest = 0, hashlib.md5()
            with part.open("ab" if offset else "wb") as handle:
                for chunk in chunks:
                    handle.write(chunk)
                    digest.update(chunk)
                    transferred += len(chunk)
                    if progress:
                        progress(len(chunk))
            break
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as err:
            if attempt == retries:
                raise DownloadError(f"{url}: {type(err).__name__} after {retries + 1} attempts; rerun to resume") from None
            wait = 2**attempt
            log.warning("%s: %s; retrying in %d s (bytes on disk are kept)", url, type(err).__name__, wait)
            time.sleep(wait)
    actual = digest.hexdigest()
    if actual != expected_md5:
        bad = part.with_name(part.name + ".bad")
        part.replace(bad)
        raise ChecksumError(f"{target.name}: md5 mismatch after download: expected {expected_md5}, actual {actual} (kept as {bad})")
    part.replace(target)
    return transferred


@dataclass
class DownloadRecord:
    """What one download job fetched; written as ``download.json`` beside the files."""

    uri: str
    base_url: str
    files: dict[str, str]
    bytes_transferred: int
    seconds: float


def staging_dir_for(dest: Path) -> Path:
    """The undeclared staging folder of a dataset destination."""
    return dest.parent / ".staging" / dest.name


def download_dataset(
    uri_url: str,
    md5_url: str,
    dest: Path,
    wanted: Callable[[str], bool] = lambda _path: True,
    pinned_md5: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> DownloadRecord:
    """Download an R2 dataset into ``dest``, resuming from the staging folder."""
    started = time.time()
    headers = auth_headers() if headers is None else headers
    base_url = fetch_text(uri_url, headers).strip().rstrip("/")
    manifest_text = fetch_text(md5_url, headers)
    entries = [e for e in parse_manifest(manifest_text, md5_url) if wanted(e.path)]
    if not entries:
        raise DownloadError(f"{md5_url}: lists no files to download")
    for entry in entries:
        pinned = (pinned_md5 or {}).get(entry.path)
        if pinned and pinned != entry.md5:
            raise ChecksumError(f"{md5_url}: {entry.path} is listed with md5 {entry.md5} but the dataset definition pins {pinned}")
    staging = staging_dir_for(dest)
    staging.mkdir(parents=True, exist_ok=True)
    todo = [e for e in entries if not (staging / e.path).is_file()]
    transferred = 0
    with tqdm(total=None, unit="B", unit_scale=True, desc=dest.name, mininterval=1.0) as bar:
        for entry in todo:
            transferred += download_file(f"{base_url}/{urllib.parse.quote(entry.path)}", staging / entry.path, entry.md5, headers, progress=bar.update)
    (staging / MANIFEST_NAME).write_text("".join(f"{e.md5}  {e.path}\n" for e in entries))
    record = DownloadRecord(
        uri=uri_url,
        base_url=base_url,
        files={e.path: e.md5 for e in entries},
        bytes_transferred=transferred,
        seconds=round(time.time() - started, 3),
    )
    (staging / RECORD_NAME).write_text(json.dumps(asdict(record), indent=2))
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging.replace(dest)
    return record
