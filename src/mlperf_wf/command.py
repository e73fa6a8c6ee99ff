"""One ``mlperf-wf`` subcommand, defined once, beside the function it runs.

A package's ``commands`` module (``acquire/commands.py``, ``run/commands.py``, ...) holds a ``COMMANDS`` tuple of
:class:`Command`; ``cli.py`` builds its parser from those tuples and dispatches to each command's ``run``. A command
module imports only what its flags need at start-up and its stage's modules inside ``run``, so that the commands every
job runs (``verify``, ``check-prepared``) start in milliseconds.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """A subcommand: its name and help, its flags, the function it runs and who types it."""

    name: str
    """The word after ``mlperf-wf`` (``download``, ``check-prepared``)."""
    help: str
    """One line, plain text (no markup): the top help's entry and the first line of the command's own ``-h``."""
    add_arguments: Callable[[argparse.ArgumentParser], None]
    """Adds the command's flags (and subcommands, if any) to its parser."""
    run: Callable[[argparse.Namespace], int | None]
    """Runs the command on the parsed flags; its return value, if any, is the exit status (None: 0)."""
    people: bool = False
    """True for a command people type (listed by ``mlperf-wf --help``); False for a step the workflow's rules run
    (named apart at the end of the top help, each with its own ``-h``)."""
    description: str | None = None
    """A longer plain-text paragraph for the command's own ``-h`` (default: its help line)."""
