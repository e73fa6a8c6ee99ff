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
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import requests
from tqdm import tqdm

from mlperf_wf.errors import ChecksumError, DownloadError
from mlperf_wf.manifest import CHUNK, MANIFEST_NAME, parse_manifest

log = logging.getLogger(__name__)

RECORD_NAME = "download.json"
AUTH_ENV = {
    "CF-Access-Client-Id": "MLPERF_WF_CF_ACCESS_CLIENT_ID",
    "CF-Access-Client-Secret": "MLPERF_WF_CF_ACCESS_CLIENT_SECRET",
    "cf-access-token": "MLPERF_WF_CF_ACCESS_TOKEN",
}
"""Cloudflare Access headers taken from these environment variables; never logged."""


def auth_headers(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Non-interactive R2 auth headers from the environment."""
    env = os.environ if environ is None else environ
    return {header: env[var] for header, var in AUTH_ENV.items() if env.get(var)}


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


class TransientError(Exception):
    """A failure worth retrying: connection reset, timeout, truncated body, HTTP 5xx."""


class Progress:
    """Thread-safe byte counter over a tqdm bar whose total grows as servers announce sizes."""

    def __init__(self, bar: tqdm) -> None:
        self.bar = bar
        self._lock = threading.Lock()

    def expect(self, n: int) -> None:
        with self._lock:
            self.bar.total = (self.bar.total or 0) + n
            self.bar.refresh()

    def update(self, n: int) -> None:
        with self._lock:
            self.bar.update(n)


@dataclass
class _Partial:
    """A ``.part`` file and the md5 of the bytes in it."""

    path: Path
    digest: hashlib._Hash
    size: int

    @classmethod
    def resume(cls, path: Path) -> _Partial:
        if path.exists():
            return cls(path, md5_of_prefix(path), path.stat().st_size)
        return cls(path, hashlib.md5(), 0)

    def restart(self) -> None:
        self.path.unlink(missing_ok=True)
        self.digest, self.size = hashlib.md5(), 0

    def append(self, chunks: Iterable[bytes], progress: Progress | None) -> int:
        """Write ``chunks`` at the end, hashing them on the way; return the bytes written."""
        written = 0
        with self.path.open("ab") as out:
            for chunk in chunks:
                out.write(chunk)
                self.digest.update(chunk)
                self.size += len(chunk)
                written += len(chunk)
                if progress:
                    progress.update(len(chunk))
        return written


def _transfer(url: str, partial: _Partial, headers: dict[str, str], timeout: float, progress: Progress | None) -> int:
    """Append the rest of ``url`` to ``partial``; return bytes received. Raises TransientError or DownloadError."""
    if _is_file_url(url):
        source = _file_url_path(url)
        if not source.is_file():
            raise DownloadError(f"{url}: no such file")
        if progress:
            progress.expect(source.stat().st_size - partial.size)
        with source.open("rb") as src:
            src.seek(partial.size)
            return partial.append(iter(lambda: src.read(CHUNK), b""), progress)
    request_headers = dict(headers)
    if partial.size:
        request_headers["Range"] = f"bytes={partial.size}-"
    try:
        response = requests.get(url, headers=request_headers, stream=True, timeout=timeout, allow_redirects=False)
    except (requests.ConnectionError, requests.Timeout) as err:
        raise TransientError(type(err).__name__) from None
    with response:
        if response.status_code == 416 and partial.size:
            return 0  # nothing left to send: the .part already holds the whole file
        if response.status_code >= 500:
            raise TransientError(f"HTTP {response.status_code}")
        if response.status_code not in (200, 206):
            raise DownloadError(f"{url}: HTTP {response.status_code} (expected 200 or 206); not retried")
        if response.status_code == 200 and partial.size:
            log.info("%s: server ignored Range; restarting from byte 0", url)
            partial.restart()
        declared = int(response.headers.get("Content-Length", -1))
        if progress and declared >= 0:
            progress.expect(declared)
        before = partial.size
        try:
            received = partial.append(response.iter_content(CHUNK), progress)
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as err:
            raise TransientError(f"{type(err).__name__} after {partial.size - before} bytes") from None
        if 0 <= declared != received:
            raise TransientError(f"body of {received} bytes, Content-Length {declared}")
        return received


def download_file(
    url: str,
    target: Path,
    expected_md5: str | None,
    headers: dict[str, str],
    retries: int = 5,
    timeout: float = 60.0,
    progress: Progress | None = None,
    backoff: float = 1.0,
) -> tuple[int, str]:
    """Download ``url`` to ``target`` via ``target.part``, resuming; return (bytes transferred now, md5).

    ``expected_md5`` None (a plain URL list without checksums) accepts the file;
    its md5, computed while streaming, is then recorded by the caller.

    Connection errors, timeouts, truncated bodies and 5xx are retried with
    exponential backoff, each retry resuming after the bytes on disk. A 4xx is
    reported at once. A finished file whose md5 differs is fetched once more
    from scratch (the bytes on disk may predate a corrupting transfer); a second
    mismatch keeps it as ``<name>.part.bad`` outside the dataset and fails.
    """
    partial = _Partial.resume(target.with_name(target.name + ".part"))
    partial.path.parent.mkdir(parents=True, exist_ok=True)
    transferred = 0
    refetched = False
    attempt = 0
    while True:
        try:
            transferred += _transfer(url, partial, headers, timeout, progress)
        except TransientError as err:
            if attempt >= retries:
                raise DownloadError(f"{url}: {err}; gave up after {retries + 1} attempts, {partial.size} bytes kept for the next run") from None
            wait = backoff * 2**attempt
            attempt += 1
            log.warning("%s: %s; retry %d/%d in %.1f s from byte %d", url, err, attempt, retries, wait, partial.size)
            time.sleep(wait)
            continue
        actual = partial.digest.hexdigest()
        if expected_md5 is None or actual == expected_md5:
            partial.path.replace(target)
            return transferred, actual
        if not refetched:
            refetched = True
            log.warning("%s: md5 %s, expected %s; fetching it again from byte 0", url, actual, expected_md5)
            partial.restart()
            continue
        bad = partial.path.with_name(partial.path.name + ".bad")
        partial.path.replace(bad)
        raise ChecksumError(f"{target.name}: md5 mismatch after download: expected {expected_md5}, actual {actual} (kept as {bad}, outside the dataset)")


@dataclass
class DownloadRecord:
    """What one download job fetched; written as ``download.json`` beside the files."""

    uri: str
    base_url: str
    files: dict[str, str]
    bytes_transferred: int
    seconds: float
    unchecked: list[str] = field(default_factory=list)
    """Files the published list gives no md5 for: their md5 is the one computed while downloading."""


def _place(staging: Path, dest: Path, record: DownloadRecord) -> None:
    """Move the complete staging folder into place, with stamps so that verifying it needs no second read."""
    from mlperf_wf.verify import write_stamps

    (staging / RECORD_NAME).write_text(json.dumps(asdict(record), indent=2))
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging.replace(dest)
    write_stamps(dest, record.files)


def _recorded_md5(staging: Path, path: str) -> str:
    """md5 of a file finished by an earlier, interrupted run (hashed again: it was never recorded)."""
    digest = md5_of_prefix(staging / path)
    return digest.hexdigest()


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
    jobs: int = 4,
    retries: int = 5,
    backoff: float = 1.0,
    timeout: float = 60.0,
) -> DownloadRecord:
    """Download an R2 dataset into ``dest`` with ``jobs`` files at a time, resuming from the staging folder."""
    started = time.time()
    headers = auth_headers() if headers is None else headers
    base_url = fetch_text(uri_url, headers).strip().rstrip("/")
    manifest_text = fetch_text(md5_url, headers)
    entries = [e for e in parse_manifest(manifest_text, md5_url) if wanted(e.path)]
    if not entries:
        raise DownloadError(f"{md5_url}: lists no files to download")
    for entry in entries:
        pinned = (pinned_md5 or {}).get(entry.path)
        if pinned and entry.md5 and pinned != entry.md5:
            raise ChecksumError(f"{md5_url}: {entry.path} is listed with md5 {entry.md5} but the dataset definition pins {pinned}")
    staging = staging_dir_for(dest)
    staging.mkdir(parents=True, exist_ok=True)
    unchecked = [e.path for e in entries if e.md5 is None]
    for path in unchecked:
        log.warning("%s lists %s without an md5: it is downloaded unchecked and its md5 is recorded as downloaded", md5_url, path)
    todo = [e for e in entries if not (staging / e.path).is_file()]
    with tqdm(total=0, unit="B", unit_scale=True, desc=dest.name, mininterval=1.0) as bar, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        progress = Progress(bar)
        expected = {e.path: e.md5 or (pinned_md5 or {}).get(e.path) for e in entries}
        futures = {
            e.path: pool.submit(
                download_file, f"{base_url}/{urllib.parse.quote(e.path)}", staging / e.path, expected[e.path], headers, retries, timeout, progress, backoff
            )
            for e in todo
        }
        done = {path: future.result() for path, future in futures.items()}
    digests = {e.path: expected[e.path] or (done[e.path][1] if e.path in done else _recorded_md5(staging, e.path)) for e in entries}
    (staging / MANIFEST_NAME).write_text("".join(f"{digest}  {path}\n" for path, digest in digests.items()))
    record = DownloadRecord(
        uri=uri_url,
        base_url=base_url,
        files=digests,
        bytes_transferred=sum(n for n, _ in done.values()),
        seconds=round(time.time() - started, 3),
        unchecked=[p for p in unchecked if not expected[p]],
    )
    _place(staging, dest, record)
    return record


def parse_url_list(text: str, source: str) -> list[tuple[str, str | None, str]]:
    """Lines ``URL`` or ``md5  URL`` (``#`` comments allowed) -> (url, md5 or None, file name)."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        md5 = parts[0].lower() if len(parts) == 2 else None
        url = parts[-1]
        if len(parts) > 2 or (md5 is not None and (len(md5) != 32 or any(c not in "0123456789abcdef" for c in md5))):
            raise DownloadError(f"{source}:{number}: expected 'URL' or 'md5  URL', got {line!r}")
        name = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)).name
        if not name:
            raise DownloadError(f"{source}:{number}: {url} names no file")
        entries.append((url, md5, name))
    names = [name for _, _, name in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DownloadError(f"{source}: several URLs end in the same file name: {duplicates}")
    return entries


def download_url_list(
    list_file: Path, dest: Path, headers: dict[str, str] | None = None, jobs: int = 4, retries: int = 5, backoff: float = 1.0
) -> DownloadRecord:
    """Download every URL of a plain list into ``dest`` (staged and resumable like an R2 dataset)."""
    started = time.time()
    headers = auth_headers() if headers is None else headers
    entries = parse_url_list(list_file.read_text(), str(list_file))
    staging = staging_dir_for(dest)
    staging.mkdir(parents=True, exist_ok=True)
    with tqdm(total=0, unit="B", unit_scale=True, desc=dest.name, mininterval=1.0) as bar, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        progress = Progress(bar)
        futures = {
            name: pool.submit(download_file, url, staging / name, md5, headers, retries, 60.0, progress, backoff)
            for url, md5, name in entries
            if not (staging / name).is_file()
        }
        done = {name: future.result() for name, future in futures.items()}
    transferred = sum(n for n, _ in done.values())
    digests = {name: md5 or (done[name][1] if name in done else _recorded_md5(staging, name)) for _, md5, name in entries}
    (staging / MANIFEST_NAME).write_text("".join(f"{digest}  {name}\n" for name, digest in digests.items()))
    record = DownloadRecord(uri=str(list_file), base_url="", files=digests, bytes_transferred=transferred, seconds=round(time.time() - started, 3))
    _place(staging, dest, record)
    return record
