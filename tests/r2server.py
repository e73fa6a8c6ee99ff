"""A loopback HTTP server in the MLCommons R2 layout, for download tests.

It serves ``/metadata/<name>.uri``, ``/metadata/<name>.md5`` and
``/data/<name>/<file>`` from a folder, honours ``Range: bytes=N-`` with 206,
counts the body bytes it sends per path, records request headers, and can be
slowed down so a test can kill a client mid-file.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import struct
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Request:
    """One GET the server answered, with the body bytes it sent for it."""

    path: str
    headers: dict[str, str]
    sent: int = 0
    started: float = 0.0
    """time.monotonic() when the request arrived."""
    finished: float = 0.0
    """time.monotonic() when its answer was sent (0 while in flight)."""


class R2Server:
    """Serve ``root`` (holding ``data/<name>/...``) as an R2 bucket on 127.0.0.1."""

    def __init__(self, root: Path, name: str, chunk: int = 64 * 1024, delay: float = 0.0) -> None:
        self.root = root
        self.name = name
        self.chunk = chunk
        self.delay = delay
        self.bytes_sent: Counter[str] = Counter()
        self.requests: list[Request] = []
        self.corrupt: set[str] = set()
        self.md5_text: str | None = None
        """Serve this as the .md5 list instead of the computed one."""
        self.data_base: str | None = None
        """The base URL the .uri names (default: this server's own data folder)."""
        self.faults: dict[str, list[str]] = {}
        """Per data path, faults to inject on the next requests, one per request:
        reset (half the body, then the connection is dropped), truncate (full Content-Length
        declared, half sent), short-length (Content-Length smaller than the body), 500, 503,
        401, 403, 404, 429, flip (one byte inverted), slow (each chunk delayed)."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                request = Request(self.path, dict(self.headers), started=time.monotonic())
                server.requests.append(request)
                try:
                    self._answer(request)
                finally:
                    request.finished = time.monotonic()

            def _answer(self, request: Request) -> None:
                location = server._redirect(self.path)
                if location:
                    self.send_response(302)
                    server._send_extra_headers(self, self.path)
                    self.send_header("Location", location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = server._resolve(self.path)
                fault = server._next_fault(self.path)
                if fault in ("500", "503", "401", "403", "404", "429"):
                    self.send_response(int(fault))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if body is not None and fault == "flip":
                    middle = len(body) // 2
                    body = body[:middle] + bytes([body[middle] ^ 0x01]) + body[middle + 1 :]
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = 0
                range_header = self.headers.get("Range")
                if range_header and range_header.startswith("bytes="):
                    start = int(range_header.removeprefix("bytes=").split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                server._send_extra_headers(self, self.path)
                length = len(body) - start
                self.send_header("Content-Length", str(length // 2 if fault == "short-length" else length))
                self.end_headers()
                stop = start + length // 2 if fault in ("reset", "truncate") else len(body)
                try:
                    for offset in range(start, stop, server.chunk):
                        piece = body[offset : min(offset + server.chunk, stop)]
                        self.wfile.write(piece)
                        server.bytes_sent[self.path] += len(piece)
                        request.sent += len(piece)
                        if server.delay or fault == "slow":
                            time.sleep(server.delay or 0.02)
                    if fault == "reset":
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    if fault in ("reset", "truncate"):
                        self.close_connection = True
                        self.connection.close()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def uri_url(self) -> str:
        return f"{self.base}/metadata/{self.name}.uri"

    @property
    def md5_url(self) -> str:
        return f"{self.base}/metadata/{self.name}.md5"

    def data_bytes_sent(self) -> int:
        return sum(n for path, n in self.bytes_sent.items() if path.startswith("/data/"))

    def _fault_key(self, path: str) -> str:
        """The ``faults`` key of a request path: the file's path in the dataset."""
        return path.removeprefix(f"/data/{self.name}/")

    def _next_fault(self, path: str) -> str | None:
        queue = self.faults.get(self._fault_key(path))
        return queue.pop(0) if queue else None

    def _redirect(self, path: str) -> str | None:
        """Where to send a request instead (302), or None: R2 answers directly."""
        return None

    def _send_extra_headers(self, handler: BaseHTTPRequestHandler, path: str) -> None:
        """Headers a protocol adds to a file response (none for R2)."""

    def _files(self) -> list[Path]:
        folder = self.root / "data" / self.name
        return sorted(p for p in folder.rglob("*") if p.is_file())

    def _resolve(self, path: str) -> bytes | None:
        folder = self.root / "data" / self.name
        if path == f"/metadata/{self.name}.uri":
            return f"{self.data_base or f'{self.base}/data/{self.name}'}\n".encode()
        if path == f"/metadata/{self.name}.md5" and self.md5_text is not None:
            return self.md5_text.encode()
        if path == f"/metadata/{self.name}.md5":
            lines = [f"{hashlib.md5(p.read_bytes()).hexdigest()}  {p.relative_to(folder).as_posix()}\n" for p in self._files()]
            return "".join(lines).encode()
        prefix = f"/data/{self.name}/"
        if path.startswith(prefix):
            rel = path.removeprefix(prefix)
            target = folder / rel
            if target.is_file():
                body = target.read_bytes()
                if rel in self.corrupt:
                    body = bytes([body[0] ^ 0xFF]) + body[1:]
                return body
        return None

    def __enter__(self) -> R2Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def kill_mid_file(command: list[str], part: Path, size: int, env: dict[str, str] | None = None, past: int = 1_000_000) -> int:
    """Start the download CLI, ``kill -9`` its process group once ``part`` holds more than ``past`` bytes;
    the bytes left on disk (asserted to be mid-file: more than ``past``, less than ``size``)."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    deadline = time.time() + 60
    while time.time() < deadline and not (part.exists() and part.stat().st_size > past):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    on_disk = part.stat().st_size
    assert past < on_disk < size, "the kill must land mid-file"
    return on_disk
