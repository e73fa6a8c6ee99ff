"""Benchmark: dataset acquisition with mlperf-wf against the MLCommons R2 downloader's method.

A loopback HTTP server (Range support, files sent with sendfile) serves an R2-layout
dataset of SIZE_GB in FILES files. In the same run it measures:

- baseline acquire: what mlc-r2-downloader.sh does after its login step,
  ``wget --continue`` over the file list, then ``md5sum -c`` over the dataset;
- ours: ``mlperf-wf download`` (parallel, md5 while streaming) then ``mlperf-wf verify``;
- baseline re-verify of the unchanged dataset: ``md5sum -c`` again;
- ours: ``mlperf-wf verify`` again (stamps: stat only).

Local page caches are dropped before each measurement when the process may
(root), so downloaded data is read from disk as it would be at terabyte scale;
the served files are then read back into memory, because they stand for a remote
server whose disk is not the client's. Prints the times and the ratios.

    python bench/acquire.py [--size-gb 2] [--files 32] [--jobs 4] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def make_dataset(root: Path, name: str, total_bytes: int, files: int) -> list[tuple[str, str]]:
    """Write ``files`` files of random-looking bytes; return (md5, relative path) pairs."""
    folder = root / "data" / name
    folder.mkdir(parents=True)
    size = total_bytes // files
    block = os.urandom(1 << 20)
    listing = []
    for i in range(files):
        rel = f"shard_{i:03d}.bin"
        digest = hashlib.md5()
        with (folder / rel).open("wb") as out:
            written = 0
            while written < size:
                piece = block[: min(len(block), size - written)]
                piece = i.to_bytes(4, "little") + piece[4:]  # every file differs
                out.write(piece)
                digest.update(piece)
                written += len(piece)
        listing.append((digest.hexdigest(), rel))
    (root / "metadata").mkdir()
    (root / "metadata" / f"{name}.md5").write_text("".join(f"{md5}  {rel}\n" for md5, rel in listing))
    return listing


class Server:
    """Serves ``root`` over HTTP on 127.0.0.1 with Range support and sendfile."""

    def __init__(self, root: Path, name: str) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == f"/metadata/{name}.uri":
                    body = f"{server.base}/data/{name}\n".encode()
                    self._send_bytes(body)
                    return
                path = root / self.path.lstrip("/")
                if not path.is_file():
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                size = path.stat().st_size
                start = 0
                if self.headers.get("Range", "").startswith("bytes="):
                    start = int(self.headers["Range"][6:].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(size - start))
                self.end_headers()
                with path.open("rb") as handle:
                    self.wfile.flush()
                    self.connection.sendfile(handle, offset=start, count=size - start)

            def _send_bytes(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def drop_caches() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def warm(folder: Path) -> None:
    """Read the served files into the page cache: the source stands for a remote server, whose disk is not ours."""
    for path in folder.rglob("*"):
        if path.is_file():
            with path.open("rb") as handle:
                while handle.read(1 << 24):
                    pass


def timed(argv: list[str], cwd: Path | None = None, source: Path | None = None) -> float:
    """Wall time of ``argv``, starting with a cold local page cache (and a warm source)."""
    drop_caches()
    if source:
        warm(source)
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=2.0)
    parser.add_argument("--files", type=int, default=32)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a temporary one); needs 3x SIZE_GB free")
    args = parser.parse_args()
    for tool in ("wget", "md5sum"):
        if shutil.which(tool) is None:
            print(f"bench/acquire.py: {tool} is not installed (apt-get install {tool})", file=sys.stderr)
            return 2
    scratch = Path(tempfile.mkdtemp(dir=args.workdir))
    try:
        name = "bench-dataset"
        listing = make_dataset(scratch / "bucket", name, int(args.size_gb * (1 << 30)), args.files)
        server = Server(scratch / "bucket", name)
        urls = scratch / "urls.txt"
        urls.write_text("".join(f"{server.base}/data/{name}/{rel}\n" for _, rel in listing))
        shutil.copy(scratch / "bucket" / "metadata" / f"{name}.md5", scratch / "list.md5")

        # Baseline: mlc-r2-downloader.sh's transfer and check commands.
        wget_dir = scratch / "wget"
        wget_dir.mkdir()
        bucket = scratch / "bucket"
        base_get = timed(["wget", "--continue", "-q", "-nH", "-x", "--cut-dirs=2", "-i", str(urls), "-P", str(wget_dir)], source=bucket)
        base_check = timed(["md5sum", "--quiet", "-c", str(scratch / "list.md5")], cwd=wget_dir)

        ours_dir = scratch / "ours" / name
        mlperf_wf = [sys.executable, "-m", "mlperf_wf"]
        ours_get = timed(
            [*mlperf_wf, "download", "--uri", f"{server.base}/metadata/{name}.uri", "--dest", str(ours_dir), "--jobs", str(args.jobs)], source=bucket
        )
        ours_check = timed([*mlperf_wf, "verify", str(ours_dir), "--out", str(scratch / "record.json")])

        base_reverify = timed(["md5sum", "--quiet", "-c", str(scratch / "list.md5")], cwd=wget_dir)
        ours_reverify = timed([*mlperf_wf, "verify", str(ours_dir), "--out", str(scratch / "record.json")])
        ours_reverify_inner = json.loads((scratch / "record.json").read_text())["seconds"]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    base_acquire, ours_acquire = base_get + base_check, ours_get + ours_check
    gib = args.size_gb
    print(f"dataset: {gib:g} GiB in {args.files} files over loopback HTTP; {os.cpu_count()} cores; page cache dropped: {drop_caches()}")
    print(f"baseline acquire  wget --continue + md5sum -c : {base_acquire:7.2f} s  ({base_get:.2f} + {base_check:.2f})")
    print(f"ours     acquire  mlperf-wf download + verify: {ours_acquire:7.2f} s  ({ours_get:.2f} + {ours_check:.2f}), jobs={args.jobs}")
    print(f"acquire ratio ours/baseline: {ours_acquire / base_acquire:.2f}x (target <= 0.5x)")
    print(f"baseline re-verify md5sum -c            : {base_reverify:7.3f} s")
    print(f"ours     re-verify mlperf-wf verify     : {ours_reverify:7.3f} s  (command; the check itself: {ours_reverify_inner:.3f} s)")
    check_ratio = base_reverify / max(ours_reverify_inner, 1e-3)
    print(f"re-verify speed-up: {base_reverify / ours_reverify:.0f}x for the command (target >= 100x), {check_ratio:.0f}x for the check")
    print("  md5sum's time grows with the bytes; ours is a stat per file plus interpreter start-up, so the ratio grows with the dataset.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
