"""Secrets sent as request headers, and the hosts each may be sent to.

A credential goes to the hosts of the URLs the catalog names (the R2 ``.uri``/``.md5`` URLs, the hub endpoint)
and to the hosts its allowlist variable adds; never to a host that only fetched content names (the base URL
inside a ``.uri`` file, a redirect). A request to any other host goes without it, with one warning line.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import urllib.parse
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

_warned: set[tuple[str, str]] = set()


def origin(url: str) -> str:
    """``host[:port]`` of ``url``, lower case (the unit an allowlist names)."""
    return urllib.parse.urlparse(url).netloc.rsplit("@", 1)[-1].lower()


def hosts_from(environ: dict[str, str] | os._Environ, variable: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """The allowlist in ``variable`` (comma-separated ``host``, ``host:port`` or ``*.domain``), else ``default``."""
    value = environ.get(variable)
    if value is None:
        return default
    return tuple(entry.strip().lower() for entry in value.split(",") if entry.strip())


@dataclass(frozen=True)
class Credentials:
    """Request headers that carry a secret, with the hosts they may go to."""

    name: str
    """How the user knows the secret (its environment variables), for messages; never the secret."""
    headers: dict[str, str]
    """The headers (empty when no secret is set)."""
    hosts: tuple[str, ...] = ()
    """``host``, ``host:port`` or ``*.domain`` entries (a bare host matches any port)."""
    hosts_variable: str = ""
    """The environment variable that sets ``hosts`` (named in the warning line)."""
    extra: tuple[str, ...] = field(default=())
    """Origins the catalog itself names for this download (trusted like the allowlist)."""

    def allowing(self, *urls: str) -> Credentials:
        """These credentials, also allowed to the origins of ``urls`` (URLs the catalog names, not fetched ones)."""
        return Credentials(self.name, self.headers, self.hosts, self.hosts_variable, (*self.extra, *(origin(u) for u in urls)))

    def allowed(self, url: str) -> bool:
        """Whether the secret may go to ``url``."""
        netloc = origin(url)
        host = netloc.rsplit(":", 1)[0] if not netloc.endswith("]") else netloc
        for entry in (*self.hosts, *self.extra):
            if netloc == entry or host == entry or ("*" in entry and fnmatch.fnmatchcase(host, entry)):
                return True
        return False

    def for_url(self, url: str) -> dict[str, str]:
        """The headers to send with a request for ``url``: all of them, or none (with one warning per host)."""
        if not self.headers or self.allowed(url):
            return dict(self.headers)
        key = (self.name, origin(url))
        if key not in _warned:
            _warned.add(key)
            allowed = ", ".join((*self.hosts, *self.extra)) or "none"
            log.warning(
                "%s: not sending %s to %s (allowed: %s); add the host to %s if it is meant to have them",
                url, self.name, origin(url), allowed, self.hosts_variable,
            )  # fmt: skip
        return {}


def headers_for(url: str, headers: Credentials | dict[str, str]) -> dict[str, str]:
    """Headers for a request to ``url``: a plain dict is sent as is (no secret in it), credentials only where allowed."""
    return headers.for_url(url) if isinstance(headers, Credentials) else dict(headers)
