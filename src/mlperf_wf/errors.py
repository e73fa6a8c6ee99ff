"""Errors the CLI reports as one line, without a traceback."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class UserError(Exception):
    """A failure the user can act on; its message names the file/key, the value and what is allowed."""


class ConfigError(UserError):
    """A configuration or registry file is invalid."""


class DownloadError(UserError):
    """A download failed."""


class ChecksumError(UserError):
    """A file's md5 differs from the published one."""


class WriteError(UserError):
    """Writing an output failed (a full disk, a lost mount): the job fails rather than leave it with holes."""


def describe_validation_error(where: str, err: ValidationError, separator: str = ": ") -> str:
    """The first problem of a pydantic error as one line: ``where: key: message (got value)``.

    ``separator`` joins ``where`` and the key (``.`` continues a dotted config key).
    """
    first = err.errors()[0]
    message = first["msg"].removeprefix("Value error, ")
    if not first["loc"]:  # a rule across keys: its message names them
        return f"{where}: {message}"
    if first["type"] == "missing":
        return f"{where}{separator}{'.'.join(map(str, first['loc']))}: {message}"
    got = repr(first.get("input"))
    got = got if len(got) <= 120 else got[:117] + "..."
    return f"{where}{separator}{'.'.join(map(str, first['loc']))}: {message} (got {got})"
