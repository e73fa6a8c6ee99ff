"""Errors the CLI reports as one line, without a traceback."""


class UserError(Exception):
    """A failure the user can act on; its message names the file/key, the value and what is allowed."""


class ConfigError(UserError):
    """A configuration or registry file is invalid."""


class DownloadError(UserError):
    """A download failed."""


class ChecksumError(UserError):
    """A file's md5 differs from the published one."""
