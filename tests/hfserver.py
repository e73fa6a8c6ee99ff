"""A loopback HTTP server in the Hugging Face Hub's layout, for download tests.

It serves one repository at one commit from ``root/data/<name>/``: the listing
``/api/{datasets|models}/<repo>/revision/<commit>`` (``sha``, ``siblings`` with
size, blobId and lfs, computed here independently of the package), the paginated
tree ``/api/.../tree/<commit>`` (``Link: rel="next"``), and files at
``/{datasets/}<repo>/resolve/<commit>/<path>`` with ``X-Repo-Commit``. LFS files
are redirected, as the hub does, to ``http://localhost:<port>/cdn/<path>`` (another
host name, so a client must not carry its token there). Range requests, byte
counts and fault injection are R2Server's (the listing's faults under ``"<listing>"``).
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.r2server import R2Server

LFS_SUFFIXES = (".parquet", ".jsonl", ".bin")
"""Files this server keeps in LFS; the rest are plain git blobs."""


def git_blob_id(data: bytes) -> str:
    """The id git gives a blob (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubServer(R2Server):
    """Serve ``root/data/<name>/`` as hub repository ``repository`` at commit ``revision`` on 127.0.0.1."""

    def __init__(self, root: Path, name: str, repository: str, revision: str, repository_type: str = "dataset", **kwargs: object) -> None:
        super().__init__(root, name, **kwargs)
        self.repository = repository
        self.revision = revision
        self.repository_type = repository_type
        self.listing_commit: str | None = None
        """Answer this ``sha`` in the listing instead of the pinned commit (a hub that moved under a result)."""
        self.served_commit: dict[str, str] = {}
        """Per file path, the ``X-Repo-Commit`` to send instead of the pinned commit."""
        self.sibling_changes: dict[str, dict] = {}
        """Per file path, keys replaced in its listing entry (``lfs`` replaced whole)."""
        self.redirect_lfs = True
        """Redirect LFS files to the CDN path, as the hub does."""
        self.siblings_cut: int | None = None
        """List only this many siblings (a listing cut short by the hub's caches); the tree stays complete."""
        self.tree_page = 1000
        """Entries per page of the tree (``Link: rel="next"`` to the next page)."""

    @property
    def endpoint(self) -> str:
        return self.base

    @property
    def listing_path(self) -> str:
        return f"/api/{self.repository_type}s/{self.repository}/revision/{self.revision}"

    @property
    def tree_path(self) -> str:
        return f"/api/{self.repository_type}s/{self.repository}/tree/{self.revision}"

    @property
    def resolve_prefix(self) -> str:
        prefix = "datasets/" if self.repository_type == "dataset" else ""
        return f"/{prefix}{self.repository}/resolve/{self.revision}/"

    def file_paths(self, rel: str) -> tuple[str, str]:
        """The resolve path and CDN path a file is requested under."""
        quoted = urllib.parse.quote(rel)
        return self.resolve_prefix + quoted, f"/cdn/{quoted}"

    def file_requests(self, rel: str) -> list:
        """Requests for a file's bytes (at the resolve path, or the CDN after a redirect)."""
        resolve, cdn = self.file_paths(rel)
        lfs = self.redirect_lfs and rel.endswith(LFS_SUFFIXES)
        return [r for r in self.requests if r.path == (cdn if lfs else resolve)]

    def _relative(self, path: str) -> str | None:
        path = urllib.parse.unquote(path.split("?", 1)[0])
        for prefix in (self.resolve_prefix, "/cdn/"):
            if path.startswith(prefix):
                return path.removeprefix(prefix)
        return None

    def _fault_key(self, path: str) -> str:
        if path.split("?", 1)[0] == self.listing_path:
            return "<listing>"
        rel = self._relative(path)
        lfs = rel is not None and self.redirect_lfs and rel.endswith(LFS_SUFFIXES)
        # An LFS file's bytes come from the CDN: its faults wait for that request.
        if rel is None or (lfs and not path.startswith("/cdn/")):
            return ""
        return rel

    def _tree_page(self, path: str) -> tuple[bytes, int | None]:
        """One page of the tree (entries as the hub's /tree endpoint gives them, folders too) and the next page's cursor."""
        cursor = int(urllib.parse.parse_qs(urllib.parse.urlparse(path).query).get("cursor", ["0"])[0])
        entries, folders = [], set()
        for sibling in self._siblings():
            folders.update(str(parent) for parent in Path(sibling["rfilename"]).parents if str(parent) != ".")
            entry = {"type": "file", "path": sibling["rfilename"], "size": sibling["size"], "oid": sibling["blobId"]}
            if "lfs" in sibling:
                entry["lfs"] = {"oid": sibling["lfs"]["sha256"], "size": sibling["lfs"]["size"], "pointerSize": sibling["lfs"]["pointerSize"]}
            entries.append(entry)
        entries += [{"type": "directory", "path": folder, "oid": "0" * 40, "size": 0} for folder in sorted(folders)]
        page = entries[cursor : cursor + self.tree_page]
        following = cursor + self.tree_page
        return json.dumps(page).encode(), following if following < len(entries) else None

    def _listing(self) -> bytes:
        siblings = self._siblings()
        if self.siblings_cut is not None:
            siblings = siblings[: self.siblings_cut]
        return json.dumps({"id": self.repository, "sha": self.listing_commit or self.revision, "siblings": siblings}).encode()

    def _siblings(self) -> list[dict]:
        folder = self.root / "data" / self.name
        siblings = []
        for path in self._files():
            rel = path.relative_to(folder).as_posix()
            data = path.read_bytes()
            entry = {"rfilename": rel, "size": len(data), "blobId": git_blob_id(data)}
            if rel.endswith(LFS_SUFFIXES):
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n".encode()
                entry["blobId"] = git_blob_id(pointer)
                entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": len(pointer)}
            entry.update(self.sibling_changes.get(rel, {}))
            siblings.append(entry)
        return siblings

    def _resolve(self, path: str) -> bytes | None:
        if path.split("?", 1)[0] == self.listing_path:
            return self._listing()
        if path.split("?", 1)[0] == self.tree_path:
            return self._tree_page(path)[0]
        rel = self._relative(path)
        target = self.root / "data" / self.name / rel if rel else None
        if target is None or not target.is_file():
            return None
        body = target.read_bytes()
        return bytes([body[0] ^ 0xFF]) + body[1:] if rel in self.corrupt else body

    def _redirect(self, path: str) -> str | None:
        rel = self._relative(path)
        if rel and path.startswith(self.resolve_prefix) and self.redirect_lfs and rel.endswith(LFS_SUFFIXES):
            return f"http://localhost:{self.httpd.server_address[1]}{self.file_paths(rel)[1]}"
        return None

    def _send_extra_headers(self, handler: BaseHTTPRequestHandler, path: str) -> None:
        if path.split("?", 1)[0] == self.tree_path:
            following = self._tree_page(path)[1]
            if following is not None:
                handler.send_header("Link", f'<{self.base}{self.tree_path}?recursive=true&cursor={following}>; rel="next"')
        rel = self._relative(path)
        if rel is not None and path.startswith(self.resolve_prefix):
            handler.send_header("X-Repo-Commit", self.served_commit.get(rel, self.revision))
