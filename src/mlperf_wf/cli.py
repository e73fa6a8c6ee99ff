"""mlperf-wf: check a config, size and preflight a full-scale plan, follow and score a campaign, and the steps the
workflow's rules run.

This module only dispatches: it builds the parser from the registered commands, handles --root, --version and
--progress-fd, and turns an error the user can act on into one line (``mlperf-wf: error: ...``) and an exit status.
Each command is defined once, beside the function it runs: a package's ``commands`` module (named in
:data:`COMMAND_MODULES`) holds a ``COMMANDS`` tuple of :class:`mlperf_wf.command.Command`, each with its name, its
one-line help, whether people type it (``people=True``: listed by the top help) or the workflow's rules run it, an
``add_arguments(parser)`` and a ``run(args)`` whose return value, if any, is the exit status. A new command is one
more ``Command`` in such a tuple; a new module of commands is one more line in :data:`COMMAND_MODULES`. A command
module imports its stage's modules inside ``run``, so that a command every job runs (``verify``) starts without
torch, pandas or mlperf-logging.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from mlperf_wf import __version__
from mlperf_wf.command import Command
from mlperf_wf.errors import UserError

COMMAND_MODULES = (
    "mlperf_wf.config.commands",
    "mlperf_wf.acquire.commands",
    "mlperf_wf.run.commands",
    "mlperf_wf.results.commands",
)
"""The modules whose ``COMMANDS`` tuple the parser offers, in the order the help lists them (people's first)."""


def registered_commands() -> tuple[Command, ...]:
    """Every command of :data:`COMMAND_MODULES`, people's first; a name registered twice is a programming error."""
    found = [command for name in COMMAND_MODULES for command in importlib.import_module(name).COMMANDS]
    names = [command.name for command in found]
    if len(set(names)) != len(names):
        raise RuntimeError(f"mlperf-wf: a command name is registered twice: {sorted({n for n in names if names.count(n) > 1})}")
    return tuple(sorted(found, key=lambda command: not command.people))


REGISTERED = registered_commands()

COMMANDS: dict[str, Callable[[argparse.Namespace], int | None]] = {command.name: command.run for command in REGISTERED}
"""Each subcommand's name and the function that runs it (its return value, if any, is the exit status)."""

PEOPLE_COMMANDS = tuple(command.name for command in REGISTERED if command.people)
"""The commands people type, listed by ``mlperf-wf --help``; the others are steps the workflow's rules run (each has
its own ``-h``), named apart at the end of the top help."""


class _PeopleFirstHelp(argparse.HelpFormatter):
    """The top help lists :data:`PEOPLE_COMMANDS` only (argparse 3.11 cannot hide a subcommand from the list)."""

    def _fill_text(self, text, width, indent):
        words = " ".join(text.split())  # a command's name is never cut at its hyphen
        return textwrap.fill(words, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)

    def _iter_indented_subactions(self, action):
        for subaction in super()._iter_indented_subactions(action):
            if getattr(subaction, "dest", None) in PEOPLE_COMMANDS or not isinstance(action, argparse._SubParsersAction):
                yield subaction


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``mlperf-wf``: the global flags, then one subparser per registered command."""
    parser = argparse.ArgumentParser(prog="mlperf-wf", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=_PeopleFirstHelp)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project root holding config/ (default: current folder)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--progress-fd",
        type=int,
        metavar="FD",
        help="also write a long step's progress lines (steps, loss) to this open file descriptor, e.g. the terminal's "
        "stderr while the log takes the rest: mlperf-wf --progress-fd 3 mirror ... 3>&2 > LOG 2>&1",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    for command in REGISTERED:
        command.add_arguments(sub.add_parser(command.name, help=command.help, description=command.description or command.help))
    steps = sorted(name for name in sub.choices if name not in PEOPLE_COMMANDS)
    parser.epilog = f"Also run by the workflow's rules (mlperf-wf COMMAND -h for each): {', '.join(steps)}."
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not Path(args.root).is_dir():
        print(f"mlperf-wf: error: --root {args.root}: no such folder (give the workflow folder)", file=sys.stderr)
        return 2
    caller_folder = os.getcwd()
    os.chdir(args.root)
    try:
        return _run_command(args)
    finally:
        os.chdir(caller_folder)  # main also runs in process (a rule's run: block, the tests): leave the caller where it was


def _run_command(args: argparse.Namespace) -> int:
    """Run the parsed subcommand; a user's mistake or a full disk is one line and an exit status, not a traceback."""
    try:
        if args.progress_fd is not None:
            from mlperf_wf import progress

            progress.to_fd(args.progress_fd)
        return COMMANDS[args.command](args) or 0
    except UserError as err:
        print(f"mlperf-wf: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `mlperf-wf status | head`: the reader left, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO):
            raise
        where = err.filename or "a file"
        print(f"mlperf-wf: error: {where}: {err.strerror}; nothing written so far is removed: free space (or fix the mount) and rerun", file=sys.stderr)
        return 1
