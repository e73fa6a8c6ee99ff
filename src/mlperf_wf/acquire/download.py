"""Resumable, parallel, staged downloads: the MLCommons R2 protocol here, the Hugging Face Hub in ``hub.py``.

The R2 protocol (mlcommons/r2-downloader): ``<name>.uri`` holds the dataset's
base URL; ``<name>.md5`` beside it lists ``md5  relative/path`` lines; each
file is ``<base>/<relative/path>``.

Files land in a *staging* folder that Snakemake does not know about (it deletes
declared outputs before a job starts, so a declared folder could never resume).
A partial file is kept as ``<path>.part``; on rerun its bytes are hashed and the
download continues with an HTTP ``Range`` request. Every digest a file is checked
against is computed while streaming. A file that fails its checks twice is moved
to the dataset's quarantine folder; only when every file is complete and correct
is the staging folder moved into place, with its md5 list, record and stamps.
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
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import requests
import urllib3
from tqdm import tqdm

from mlperf_wf.acquire.credentials import Credentials, get, hosts_from, origin, redact, redacting
from mlperf_wf.acquire.manifest import CHUNK, MANIFEST_NAME, manifest_text, parse_manifest
from mlperf_wf.acquire.verify import git_blob_hash, hash_file, quarantine_file
from mlperf_wf.errors import ChecksumError, DownloadError

log = logging.getLogger(__name__)

RECORD_NAME = "download.json"
AUTH_ENV = {
    "CF-Access-Client-Id": "MLPERF_WF_CF_ACCESS_CLIENT_ID",
    "CF-Access-Client-Secret": "MLPERF_WF_CF_ACCESS_CLIENT_SECRET",
    "cf-access-token": "MLPERF_WF_CF_ACCESS_TOKEN",
}
"""Cloudflare Access headers taken from these environment variables; never logged."""
AUTH_HOSTS_ENV = "MLPERF_WF_CF_ACCESS_HOSTS"
"""Comma-separated hosts the Cloudflare Access headers may go to, besides those of the catalog's ``.uri``/``.md5`` URLs."""
AUTH_HOSTS = ("*.mlcommons-storage.org",)
"""Where MLCommons serves its R2 datasets (the default of ``AUTH_HOSTS_ENV``)."""


def auth_headers(environ: dict[str, str] | None = None) -> Credentials:
    """Non-interactive R2 auth headers from the environment, for the hosts they are for."""
    env = os.environ if environ is None else environ
    headers = {header: env[var] for header, var in AUTH_ENV.items() if env.get(var)}
    return Credentials("MLPERF_WF_CF_ACCESS_*", headers, hosts_from(env, AUTH_HOSTS_ENV, AUTH_HOSTS), AUTH_HOSTS_ENV)


ACCESS_REFUSED = "access refused"
"""Words every refusal's line holds (the download command adds the catalog's access note after them)."""


def not_the_file(url: str, response: requests.Response, headers: Credentials | dict[str, str], expected: str = "200") -> str:
    """The line for an answer that is not the file. A refusal (401, 403) or a redirect (where R2's Cloudflare Access
    sends a request without a valid token: its sign-in page) says whether the request that got it carried the
    credentials (read from the request as sent, at the host that answered), and how to give them."""
    status = response.status_code
    answered = response.url or url
    at = f" (answered by {redact(answered)})" if response.history else ""
    line = f"{redact(url)}: HTTP {status} (expected {expected}){at}"
    if status not in (401, 403) and not response.is_redirect:
        return line
    location = response.headers.get("location")
    where = f" to {redact(location)}" if response.is_redirect and location else ""
    if not isinstance(headers, Credentials) or not headers.name.startswith("MLPERF_WF_CF_ACCESS"):
        return f"{line}{where}"  # another protocol's caller says which credentials it takes (the hub: HF_TOKEN)
    host = origin(answered)
    if not headers.headers:
        how = (
            "none of MLPERF_WF_CF_ACCESS_CLIENT_ID with MLPERF_WF_CF_ACCESS_CLIENT_SECRET (a Cloudflare Access service token) or "
            "MLPERF_WF_CF_ACCESS_TOKEN is set; members-only MLCommons data needs one"
        )
    elif not headers.carried_by(response.request.headers if response.request else None):
        how = (
            f"MLPERF_WF_CF_ACCESS_* are set but were not sent to {host} (neither the catalog's host nor in {headers.hosts_variable}): "
            f"add it to {headers.hosts_variable} if it is MLCommons' host"
        )
    elif response.is_redirect:
        return (
            f"{line}{where}: not followed: the MLPERF_WF_CF_ACCESS_* credentials were sent to {host}, which answered with a redirect "
            "rather than the file or a refusal; if it is Cloudflare Access's sign-in page they are not current or give no access "
            "to this dataset, otherwise give --uri on the host it redirects to"
        )
    else:
        how = f"the MLPERF_WF_CF_ACCESS_* credentials were sent to {host} and refused: check that they are current and give access to this dataset"
    return f"{line}{where}: {ACCESS_REFUSED}: {how}"


def _is_file_url(url: str) -> bool:
    return urllib.parse.urlparse(url).scheme == "file"


def _file_url_path(url: str) -> Path:
    return Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))


def fetch_text(url: str, headers: Credentials | dict[str, str], timeout: float = 60.0, follow_redirects: bool = False) -> str:
    """Read a small metadata file over https:// or file:// (a file URL's query string is not part of its path)."""
    if _is_file_url(url):
        path = _file_url_path(url)
        if not path.is_file():
            raise DownloadError(f"{redact(url)}: no such file")
        try:
            return path.read_text()
        except UnicodeDecodeError as err:
            raise DownloadError(f"{url}: not text (byte {err.start} is not UTF-8); expected a .uri or .md5 file") from None
    try:
        response = get(url, headers, timeout=timeout, follow_redirects=follow_redirects)
    except requests.RequestException as err:
        raise DownloadError(redact(f"{url}: {type(err).__name__}: {err}")) from None
    if response.status_code != 200:
        raise DownloadError(not_the_file(url, response, headers))
    return response.text


def fetch_pages(url: str, headers: Credentials | dict[str, str], timeout: float = 60.0) -> Iterator[str]:
    """The pages of a paginated answer, following ``Link: <url>; rel="next"`` (a file:// URL is one page)."""
    while url:
        if _is_file_url(url):
            yield fetch_text(url, headers, timeout)
            return
        try:
            response = get(url, headers, timeout=timeout)
        except requests.RequestException as err:
            raise DownloadError(redact(f"{url}: {type(err).__name__}: {err}")) from None
        if response.status_code != 200:
            raise DownloadError(not_the_file(url, response, headers))
        yield response.text
        url = response.links.get("next", {}).get("url")


@dataclass(frozen=True)
class Expected:
    """What a downloaded file must be; a None field is not checked (md5 is always computed, for the md5 list)."""

    md5: str | None = None
    """md5 (an R2 list's)."""
    sha256: str | None = None
    """sha256 (the hub's LFS sha256, or a value pinned in the catalog)."""
    git_blob: str | None = None
    """git blob id: sha1 of ``"blob <size>\\0"`` + content (the hub's id of a file kept in git rather than LFS); needs ``size``."""
    size: int | None = None
    """Size in bytes."""
    record_sha256: bool = False
    """Compute the sha256 even when none is expected (the hub protocol records it for every file)."""

    def new_hashes(self) -> dict[str, hashlib._Hash]:
        """Fresh hash states for every digest this file is checked against or recorded with."""
        hashes = {"md5": hashlib.md5()}
        if self.sha256 or self.record_sha256:
            hashes["sha256"] = hashlib.sha256()
        if self.git_blob:
            hashes["git_blob"] = git_blob_hash(self.size or 0)
        return hashes

    def mismatch(self, size: int, digests: dict[str, str]) -> tuple[str, str, str] | None:
        """(what, expected, actual) of the first check a finished file fails, or None."""
        if self.size is not None and size != self.size:
            return "size", f"{self.size} bytes", f"{size} bytes"
        for name in ("sha256", "git_blob", "md5"):
            wanted = getattr(self, name)
            if wanted and digests[name] != wanted:
                return name.replace("_", " "), wanted, digests[name]
        return None


def _hexdigests(hashes: dict[str, hashlib._Hash]) -> dict[str, str]:
    return {name: digest.hexdigest() for name, digest in hashes.items()}


class TransientError(Exception):
    """A failure worth retrying: connection reset, timeout, truncated body, HTTP 5xx or 429."""


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


@dataclass(frozen=True)
class Transport:
    """How files are requested: headers, retries and what a response must show before its body is kept."""

    headers: Credentials | dict[str, str]
    """Request headers (auth from the environment, sent only to the hosts it is for; never logged)."""
    retries: int = 5
    """Retries of a transient failure, each resuming after the bytes on disk."""
    backoff: float = 1.0
    """First retry's wait in seconds, doubled each time."""
    timeout: float = 60.0
    """Connect and read timeout of one request, in seconds."""
    follow_redirects: bool = False
    """Follow HTTP redirects (the hub sends LFS files to a CDN; requests drops ``Authorization`` when the host changes)."""
    check_response: Callable[[requests.Response], None] | None = None
    """Raises DownloadError when a response (or a redirect before it) serves something else than was asked for."""


@dataclass
class _Partial:
    """A ``.part`` file and the digests of the bytes in it."""

    path: Path
    expected: Expected
    hashes: dict[str, hashlib._Hash]
    size: int

    @classmethod
    def resume(cls, path: Path, expected: Expected) -> _Partial:
        if path.exists():
            return cls(path, expected, hash_file(path, expected.new_hashes()), path.stat().st_size)
        return cls(path, expected, expected.new_hashes(), 0)

    def restart(self) -> None:
        self.path.unlink(missing_ok=True)
        self.hashes, self.size = self.expected.new_hashes(), 0

    def append(self, chunks: Iterable[bytes], progress: Progress | None) -> int:
        """Write ``chunks`` at the end, hashing them on the way; return the bytes written."""
        written = 0
        with self.path.open("ab") as out:
            for chunk in chunks:
                out.write(chunk)
                for digest in self.hashes.values():
                    digest.update(chunk)
                self.size += len(chunk)
                written += len(chunk)
                if progress:
                    progress.update(len(chunk))
        return written


def _body(response: requests.Response) -> Iterator[bytes]:
    """The body as it arrives, at most CHUNK bytes at a time. Not ``iter_content``: it gathers a whole CHUNK before
    yielding, so a connection closed mid-chunk would lose every byte of that chunk that did arrive."""
    while chunk := response.raw.read1(CHUNK, decode_content=True):
        yield chunk


def _transfer(url: str, partial: _Partial, transport: Transport, progress: Progress | None) -> int:
    """Append the rest of ``url`` to ``partial``; return bytes received. Raises TransientError or DownloadError."""
    if _is_file_url(url):
        source = _file_url_path(url)
        if not source.is_file():
            raise DownloadError(f"{redact(url)}: no such file")
        if progress:
            progress.expect(source.stat().st_size - partial.size)
        with source.open("rb") as src:
            src.seek(partial.size)
            return partial.append(iter(lambda: src.read(CHUNK), b""), progress)
    request_headers = {"Range": f"bytes={partial.size}-"} if partial.size else {}
    try:
        response = get(url, transport.headers, request_headers, transport.timeout, stream=True, follow_redirects=transport.follow_redirects)
    except (requests.ConnectionError, requests.Timeout) as err:
        raise TransientError(type(err).__name__) from None
    with response:
        if transport.check_response:
            transport.check_response(response)  # before a byte of the body is kept
        if response.status_code == 416 and partial.size:
            return 0  # nothing left to send: the .part already holds the whole file
        if response.status_code >= 500 or response.status_code == 429:
            raise TransientError(f"HTTP {response.status_code}")
        if response.status_code not in (200, 206):
            raise DownloadError(f"{not_the_file(url, response, transport.headers, '200 or 206')}; not retried")
        if response.status_code == 200 and partial.size:
            log.info("%s: server ignored Range; restarting from byte 0", redact(url))
            partial.restart()
        declared = int(response.headers.get("Content-Length", -1))
        if progress and declared >= 0:
            progress.expect(declared)
        before = partial.size
        try:
            received = partial.append(_body(response), progress)
        except (requests.ConnectionError, requests.Timeout, urllib3.exceptions.HTTPError) as err:
            of = f" of {declared}" if declared >= 0 else ""
            raise TransientError(f"{type(err).__name__} after {partial.size - before}{of} bytes") from None
        if 0 <= declared != received:
            raise TransientError(f"body of {received} bytes, Content-Length {declared}")
        return received


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset to download."""

    path: str
    """Path relative to the dataset folder."""
    url: str
    """Where it is fetched from (https://, http:// or file://)."""
    expected: Expected
    """What it must be."""


def download_file(file: RemoteFile, dest: Path, transport: Transport, progress: Progress | None = None) -> tuple[int, dict[str, str]]:
    """Download ``file`` into the staging folder of ``dest`` via ``<path>.part``, resuming; return (bytes transferred now, digests).

    Connection errors, timeouts, truncated bodies, 429 and 5xx are retried with
    exponential backoff, each retry resuming after the bytes on disk. Another 4xx
    is reported at once. A finished file that fails a check is fetched once more
    from scratch (the bytes on disk may predate a corrupting transfer); a second
    failure moves it to the quarantine folder and fails naming what differs.
    """
    target = staging_dir_for(dest) / file.path
    partial = _Partial.resume(target.with_name(target.name + ".part"), file.expected)
    partial.path.parent.mkdir(parents=True, exist_ok=True)
    transferred = 0
    refetched = False
    attempt = 0
    while True:
        try:
            transferred += _transfer(file.url, partial, transport, progress)
        except TransientError as err:
            if attempt >= transport.retries:
                kept = f"{partial.size} bytes kept for the next run"
                raise DownloadError(f"{redact(file.url)}: {err}; gave up after {transport.retries + 1} attempts, {kept}") from None
            wait = transport.backoff * 2**attempt
            attempt += 1
            log.warning("%s: %s; retry %d/%d in %.1f s from byte %d", redact(file.url), err, attempt, transport.retries, wait, partial.size)
            time.sleep(wait)
            continue
        digests = _hexdigests(partial.hashes)
        failed = file.expected.mismatch(partial.size, digests)
        if failed is None:
            partial.path.replace(target)
            return transferred, digests
        what, wanted, actual = failed
        if not refetched:
            refetched = True
            log.warning("%s: %s %s, expected %s; fetching it again from byte 0", redact(file.url), what, actual, wanted)
            partial.restart()
            continue
        moved = quarantine_file(dest, file.path, partial.path)
        raise ChecksumError(f"{dest.name}/{file.path}: {what} mismatch after download: expected {wanted}, actual {actual}; moved to {moved}")


def _obtain(file: RemoteFile, dest: Path, transport: Transport, progress: Progress | None) -> tuple[int, dict[str, str]]:
    """A file an interrupted run finished is re-hashed and kept if it still passes its checks (the published
    list or pinned commit may have changed since); otherwise, or when absent, it is downloaded."""
    staged = staging_dir_for(dest) / file.path
    if staged.is_file():
        digests = _hexdigests(hash_file(staged, file.expected.new_hashes()))
        failed = file.expected.mismatch(staged.stat().st_size, digests)
        if failed is None:
            return 0, digests
        moved = quarantine_file(dest, file.path, staged)
        log.warning("%s/%s: staged by an earlier run with %s %s, expected %s; moved to %s and downloaded again", dest.name, file.path, *failed, moved)
    return download_file(file, dest, transport, progress)


def fetch_files(files: list[RemoteFile], dest: Path, transport: Transport, jobs: int) -> tuple[dict[str, dict[str, str]], int]:
    """Download ``jobs`` files at a time into the staging folder of ``dest``; return every file's digests and the bytes transferred."""
    staging_dir_for(dest).mkdir(parents=True, exist_ok=True)
    with tqdm(total=0, unit="B", unit_scale=True, desc=dest.name, mininterval=1.0) as bar, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        progress = Progress(bar)
        futures = {f.path: pool.submit(_obtain, f, dest, transport, progress) for f in files}
        done = {path: future.result() for path, future in futures.items()}
    return {path: digests for path, (_, digests) in done.items()}, sum(n for n, _ in done.values())


@dataclass
class DownloadRecord:
    """What one download job fetched; written as ``download.json`` beside the files."""

    uri: str
    base_url: str
    files: dict[str, str]
    """Path -> md5 (also written as the dataset's md5 list, which the verify stage checks)."""
    bytes_transferred: int
    seconds: float
    unchecked: list[str] = field(default_factory=list)
    """Files the published list gives no md5 for: their md5 is the one computed while downloading."""
    commit: str | None = None
    """The hub protocol: the commit every file was served from."""
    sha256: dict[str, str] = field(default_factory=dict)
    """The hub protocol: path -> sha256 computed while downloading (checked against the hub's where it gives one)."""


def place_dataset(staging: Path, dest: Path, record: DownloadRecord) -> None:
    """Move the complete staging folder into place with its md5 list, record and stamps (so verifying it needs no second read)."""
    from mlperf_wf.acquire.verify import write_stamps

    (staging / MANIFEST_NAME).write_text(manifest_text(record.files))
    (staging / RECORD_NAME).write_text(json.dumps(asdict(record), indent=2))
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging.replace(dest)
    write_stamps(dest, record.files)


def staging_dir_for(dest: Path) -> Path:
    """The undeclared staging folder of a dataset destination."""
    return dest.parent / ".staging" / dest.name


@redacting
def download_dataset(
    uri_url: str,
    md5_url: str,
    dest: Path,
    wanted: Callable[[str], bool] = lambda _path: True,
    pinned_md5: dict[str, str] | None = None,
    headers: Credentials | dict[str, str] | None = None,
    jobs: int = 4,
    retries: int = 5,
    backoff: float = 1.0,
    timeout: float = 60.0,
    catalog_urls: tuple[str, ...] = (),
) -> DownloadRecord:
    """Download an R2 dataset into ``dest`` with ``jobs`` files at a time, resuming from the staging folder.

    The credentials go to the hosts of ``catalog_urls`` (the catalog entry's ``.uri`` and ``.md5`` URLs) and their
    allowlist; not to the host of a ``uri_url`` given instead, nor to another host the ``.uri`` file names."""
    started = time.time()
    headers = auth_headers() if headers is None else headers
    if isinstance(headers, Credentials):
        headers = headers.allowing(*catalog_urls)
    base_url = fetch_text(uri_url, headers).strip().rstrip("/")
    parsed = urllib.parse.urlparse(base_url)
    if parsed.scheme not in ("https", "http", "file") or not (parsed.netloc or parsed.scheme == "file") or any(c.isspace() for c in base_url):
        shown = repr(redact(base_url)[:80]) if base_url else "nothing"
        raise DownloadError(f"{uri_url}: holds {shown}, not a base URL (expected one https://, http:// or file:// URL)")
    manifest_text = fetch_text(md5_url, headers)
    entries = [e for e in parse_manifest(manifest_text, md5_url) if wanted(e.path)]
    if not entries:
        raise DownloadError(f"{md5_url}: lists no files to download")
    for entry in entries:
        pinned = (pinned_md5 or {}).get(entry.path)
        if pinned and entry.md5 and pinned != entry.md5:
            raise ChecksumError(f"{md5_url}: {entry.path} is listed with md5 {entry.md5} but the dataset definition pins {pinned}")
    unchecked = [e.path for e in entries if e.md5 is None and not (pinned_md5 or {}).get(e.path)]
    for path in unchecked:
        log.warning("%s lists %s without an md5: it is downloaded unchecked and its md5 is recorded as downloaded", redact(md5_url), path)
    files = [RemoteFile(e.path, f"{base_url}/{urllib.parse.quote(e.path)}", Expected(md5=e.md5 or (pinned_md5 or {}).get(e.path))) for e in entries]
    digests, transferred = fetch_files(files, dest, Transport(headers, retries, backoff, timeout), jobs)
    record = DownloadRecord(
        uri=redact(uri_url),
        base_url=redact(base_url),
        files={path: d["md5"] for path, d in digests.items()},
        bytes_transferred=transferred,
        seconds=round(time.time() - started, 3),
        unchecked=unchecked,
    )
    place_dataset(staging_dir_for(dest), dest, record)
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


@redacting
def download_url_list(
    list_file: Path, dest: Path, headers: Credentials | dict[str, str] | None = None, jobs: int = 4, retries: int = 5, backoff: float = 1.0
) -> DownloadRecord:
    """Download every URL of a plain list into ``dest`` (staged and resumable like an R2 dataset)."""
    started = time.time()
    headers = auth_headers() if headers is None else headers
    files = [RemoteFile(name, url, Expected(md5=md5)) for url, md5, name in parse_url_list(list_file.read_text(), str(list_file))]
    digests, transferred = fetch_files(files, dest, Transport(headers, retries, backoff), jobs)
    record = DownloadRecord(
        uri=str(list_file),
        base_url="",
        files={path: d["md5"] for path, d in digests.items()},
        bytes_transferred=transferred,
        seconds=round(time.time() - started, 3),
    )
    place_dataset(staging_dir_for(dest), dest, record)
    return record
