"""Secrets sent as request headers, and the hosts each may be sent to.

A credential goes to the hosts of the URLs the catalog entry names (the R2 ``.uri``/``.md5`` URLs, the hub
endpoint) and to the hosts its allowlist variable adds; never to a host only a flag (``--uri``, ``--endpoint``)
or fetched content names (the base URL inside a ``.uri`` file, a redirect). ``get`` is the one way requests are
made: it decides the headers for each hop's own host, redirects included (requests drops ``Authorization`` on a
cross-host redirect but keeps custom headers such as ``CF-Access-*``). A request to any other host goes without
them, with one warning line. ``redact`` hides a URL's ``user:password@`` wherever a URL is printed or recorded.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import os
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

import requests

from mlperf_wf.errors import UserError

log = logging.getLogger(__name__)

_warned: set[tuple[str, str]] = set()

MAX_REDIRECTS = 10
"""Redirect hops ``get`` follows before giving up (as requests' default, 30, is far more than a CDN needs)."""

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s?#]*@")


def redact(text: str) -> str:
    """``text`` with the user info (``user:password@``) of every URL in it shown as ``***@``: a password in a URL is
    never printed or recorded."""
    return _USERINFO.sub(r"\g<scheme>***@", text)


Params = ParamSpec("Params")
Result = TypeVar("Result")


def redacting(function: Callable[Params, Result]) -> Callable[Params, Result]:
    """``function`` with the message of every user error it raises passed through ``redact``."""

    @functools.wraps(function)
    def wrapper(*args: Params.args, **kwargs: Params.kwargs) -> Result:
        try:
            return function(*args, **kwargs)
        except UserError as err:
            raise type(err)(redact(str(err))) from None

    return wrapper


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

    def carried_by(self, request_headers: object) -> bool:
        """Whether a request with ``request_headers`` (as sent) carried any of these credentials."""
        sent = {name.lower() for name in request_headers or {}}  # type: ignore[union-attr]
        return any(name.lower() in sent for name in self.headers)

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
                redact(url), self.name, origin(url), allowed, self.hosts_variable,
            )  # fmt: skip
        return {}


def headers_for(url: str, headers: Credentials | dict[str, str]) -> dict[str, str]:
    """Headers for a request to ``url``: a plain dict is sent as is (no secret in it), credentials only where allowed."""
    return headers.for_url(url) if isinstance(headers, Credentials) else dict(headers)


def get(
    url: str,
    credentials: Credentials | dict[str, str],
    headers: dict[str, str] | None = None,
    timeout: float = 60.0,
    stream: bool = False,
    follow_redirects: bool = False,
) -> requests.Response:
    """GET ``url`` with ``headers`` and the credentials its host may have; each redirect hop (when followed) gets
    the credentials of its own host only. The answer's ``history`` holds the hops before it."""
    hops: list[requests.Response] = []
    for _ in range(MAX_REDIRECTS + 1):
        response = requests.get(url, headers={**headers_for(url, credentials), **(headers or {})}, timeout=timeout, stream=stream, allow_redirects=False)
        if not (follow_redirects and response.is_redirect):
            response.history = hops
            return response
        response.close()
        hops.append(response)
        url = urllib.parse.urljoin(response.url, response.headers["location"])
    raise requests.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects")
