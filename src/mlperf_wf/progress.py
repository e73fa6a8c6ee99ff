"""Progress of a long step for the person at the terminal, while the step's log keeps everything.

A workflow job's stdout and stderr go to its log file, so nothing it logs reaches the terminal. A rule whose job takes
more than a few seconds passes the terminal's stderr to the command as another file descriptor
(``mlperf-wf --progress-fd 3 ... 3>&2 > {log} 2>&1``); :func:`to_fd` sends this module's lines there too, and every line
still goes to the log like any other.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

LOGGER = logging.getLogger("mlperf_wf.progress")
"""Logger of the progress lines: the log file's handlers get them as any line, ``to_fd``'s handler as well."""

EVERY_S = 5.0
"""Seconds between two progress lines of a step (the first and last lines are always written)."""


def to_fd(fd: int) -> None:
    """Also write the progress lines to the open file descriptor ``fd`` (the terminal's stderr, passed to a job)."""
    try:
        stream = os.fdopen(os.dup(fd), "w", buffering=1)
    except OSError as err:
        from mlperf_wf.errors import UserError

        raise UserError(f"--progress-fd {fd}: {err.strerror}; give a descriptor the shell opened (3>&2)") from None
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("mlperf-wf: %(message)s"))
    handler.setLevel(logging.INFO)
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)


class Progress:
    """The steps of one long task (``what``, ``total`` steps): a line at the first step, then at most one every
    ``every_s`` seconds, and at the last step."""

    def __init__(self, what: str, total: int, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.total = total
        self.every_s = every_s
        self.clock = clock
        self.started = clock()
        self.last: float | None = None

    def step(self, done: int, **values: float) -> None:
        """Step ``done`` (counted from 1) has finished with ``values`` (a loss, ...): write its line when it is due."""
        now = self.clock()
        if self.last is not None and done < self.total and now - self.last < self.every_s:
            return
        self.last = now
        shown = "".join(f", {name} {value:.4f}" for name, value in values.items())
        LOGGER.info("%s: step %d of %d%s (%.0f s)", self.what, done, self.total, shown, now - self.started)
