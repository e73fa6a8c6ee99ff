"""Errors the CLI reports as one line, without a traceback."""


class WorkflowError(Exception):
    """A failure the user can act on; its message names the file/key, the value and what is allowed."""


class ConfigError(WorkflowError):
    """A configuration or registry file is invalid."""


class DownloadError(WorkflowError):
    """A download failed."""


class ChecksumError(WorkflowError):
    """A file's md5 differs from the published one."""
