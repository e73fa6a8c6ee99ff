"""A loopback container registry (the push half of the Docker Registry HTTP API v2), for tests.

``docker push`` to it gives a locally built image a repository digest (``RepoDigests``), so a
test can run it the way a full-scale run does: pinned as ``name:tag@sha256:...``. Blobs and
manifests live in memory; digests are checked as they arrive. Docker treats 127.0.0.0/8 as an
insecure (plain HTTP) registry by default.
"""

from __future__ import annotations

import hashlib
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

_BLOB = re.compile(r"^/v2/(?P<name>.+)/blobs/(?P<digest>sha256:[0-9a-f]{64})$")
_UPLOADS = re.compile(r"^/v2/(?P<name>.+)/blobs/uploads/(?P<upload>[0-9a-f-]*)$")
_MANIFEST = re.compile(r"^/v2/(?P<name>.+)/manifests/(?P<reference>[^/]+)$")


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class _Store:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.uploads: dict[str, bytearray] = {}
        self.manifests: dict[tuple[str, str], tuple[str, bytes]] = {}
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    store: _Store

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _reply(self, status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        self.send_response(status)
        for key, value in {"Docker-Distribution-API-Version": "registry/2.0", "Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path in ("/v2/", "/v2"):
            return self._reply(200, {"Content-Type": "application/json"}, b"{}")
        if match := _BLOB.match(path):
            blob = self.store.blobs.get(match["digest"])
            return self._reply(404) if blob is None else self._reply(200, {"Docker-Content-Digest": match["digest"]}, blob)
        if match := _MANIFEST.match(path):
            found = self.store.manifests.get((match["name"], match["reference"]))
            if found is None:
                return self._reply(404)
            media_type, body = found
            return self._reply(200, {"Content-Type": media_type, "Docker-Content-Digest": _digest(body)}, body)
        return self._reply(404)

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        match = _UPLOADS.match(url.path)
        if not match:
            return self._reply(404)
        body = self._body()
        digest = parse_qs(url.query).get("digest", [None])[0]
        if digest:  # monolithic upload
            return self._store_blob(match["name"], digest, body)
        upload = str(uuid.uuid4())
        with self.store.lock:
            self.store.uploads[upload] = bytearray(body)
        location = f"/v2/{match['name']}/blobs/uploads/{upload}"
        return self._reply(202, {"Location": location, "Docker-Upload-UUID": upload, "Range": "0-0"})

    def do_PATCH(self) -> None:
        match = _UPLOADS.match(urlsplit(self.path).path)
        if not match or match["upload"] not in self.store.uploads:
            return self._reply(404)
        data = self.store.uploads[match["upload"]]
        data += self._body()
        location = f"/v2/{match['name']}/blobs/uploads/{match['upload']}"
        return self._reply(202, {"Location": location, "Docker-Upload-UUID": match["upload"], "Range": f"0-{max(len(data) - 1, 0)}"})

    def do_PUT(self) -> None:
        url = urlsplit(self.path)
        if match := _UPLOADS.match(url.path):
            data = self.store.uploads.pop(match["upload"], bytearray()) + self._body()
            return self._store_blob(match["name"], parse_qs(url.query).get("digest", [""])[0], bytes(data))
        if match := _MANIFEST.match(url.path):
            body = self._body()
            digest = _digest(body)
            media_type = self.headers.get("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
            with self.store.lock:
                self.store.manifests[(match["name"], match["reference"])] = (media_type, body)
                self.store.manifests[(match["name"], digest)] = (media_type, body)
            return self._reply(201, {"Location": f"/v2/{match['name']}/manifests/{digest}", "Docker-Content-Digest": digest})
        return self._reply(404)

    def _store_blob(self, name: str, digest: str, data: bytes) -> None:
        if _digest(data) != digest:
            return self._reply(400, {"Content-Type": "application/json"}, b'{"errors":[{"code":"DIGEST_INVALID"}]}')
        with self.store.lock:
            self.store.blobs[digest] = data
        return self._reply(201, {"Location": f"/v2/{name}/blobs/{digest}", "Docker-Content-Digest": digest})


class LoopbackRegistry:
    """``with LoopbackRegistry() as registry: docker push {registry.host}/name:tag``."""

    def __init__(self) -> None:
        handler = type("Handler", (_Handler,), {"store": _Store()})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.host = f"127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> LoopbackRegistry:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _layer(files: dict[str, bytes]) -> bytes:
    """A gzipped layer tarball of ``files`` (container path -> contents; ``dir/.wh.name`` deletes ``dir/name`` below)."""
    import gzip
    import io
    import tarfile

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o755 if path.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def folder_layer(folder: Path) -> bytes:
    """A gzipped layer tarball of everything under ``folder`` (its paths relative to it, links kept as links)."""
    import gzip
    import io
    import tarfile

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
    return gzip.compress(raw.getvalue(), mtime=0)


def push_image(host: str, repository: str, tag: str, layers: list[dict[str, bytes] | bytes], env: dict[str, str], workdir: str = "/") -> str:
    """Push an OCI image of ``layers`` (each: container path -> contents, or a made layer; lowest first) with ``env`` and
    ``workdir`` to the registry at ``host``, over its HTTP API as any client does; returns the manifest digest."""
    import json
    import urllib.request

    def put_blob(data: bytes) -> dict:
        digest = _digest(data)
        request = urllib.request.Request(f"http://{host}/v2/{repository}/blobs/uploads/?digest={digest}", data=data, method="POST")
        urllib.request.urlopen(request).close()
        return {"digest": digest, "size": len(data)}

    blobs = [layer if isinstance(layer, bytes) else _layer(layer) for layer in layers]
    diff_ids = [_digest(__import__("gzip").decompress(blob)) for blob in blobs]
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": [f"{k}={v}" for k, v in env.items()], "WorkingDir": workdir},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **put_blob(json.dumps(config).encode())},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **put_blob(blob)} for blob in blobs],
    }
    body = json.dumps(manifest).encode()
    request = urllib.request.Request(f"http://{host}/v2/{repository}/manifests/{tag}", data=body, method="PUT", headers={"Content-Type": manifest["mediaType"]})
    urllib.request.urlopen(request).close()
    return _digest(body)
