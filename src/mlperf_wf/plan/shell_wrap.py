"""A long shell command as lines a person can read, which the shell still reads as the same command.

A full-scale train job's command is one line of thousands of characters (the launch, the run's command again as its
provenance, the config as JSON). Printed, it is broken into lines of at most about ``width`` characters: between words
with a backslash-newline and an indent (``word \\`` / ``    word``), and inside a single-quoted string by closing the
quote, a backslash-newline and opening it again at the start of the next line (``'abc'\\`` / ``'def'``), which joins the
two halves into the one word they were. Double-quoted strings, ANSI-C strings (``$'...'``) and comments are never broken.
:func:`unwrap` gives the one-line command back.
"""

from __future__ import annotations

import re
import textwrap

WIDTH = 150
"""Characters a wrapped command's lines keep to (a line may end two characters past it, with its continuation mark)."""

INDENT = "    "
"""Indent of a continuation line that starts a new word."""

_BETWEEN_WORDS = f" \\\n{INDENT}"
_IN_QUOTES = "'\\\n'"


def _breaks(command: str) -> list[tuple[int, bool, bool]]:
    """(position, between words, at a space) of every place the command may be broken: a single space outside quotes
    (the space is replaced), or any position inside a single-quoted string (the quote is closed and reopened)."""
    found: list[tuple[int, bool, bool]] = []
    quote = ""
    i = 0
    while i < len(command):
        char = command[i]
        if quote == "'":
            if char == "'":
                quote = ""
            elif command[i - 1] != "'":  # not right after the opening quote: a '' half would be a word of its own
                found.append((i, False, char == " "))
        elif quote == '"':
            if char == "\\":
                i += 1
            elif char == '"':
                quote = ""
        elif char == "\\":
            i += 1
        elif char == "$" and command[i + 1 : i + 2] == "'":
            end = command.find("'", i + 2)
            while end != -1 and command[end - 1] == "\\":
                end = command.find("'", end + 1)
            i = len(command) if end == -1 else end
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or command[i - 1] in " \t;&|("):
            break  # a comment runs to the end of the line: nothing after it may be broken
        elif char == " " and 0 < i < len(command) - 1 and command[i - 1] != " " and command[i + 1] != " ":
            found.append((i, True, True))
        i += 1
    return found


def wrap(command: str, width: int = WIDTH, first: int = 0) -> str:
    """``command`` broken into lines of about ``width`` characters (the first line has ``first`` taken already)."""
    if "\n" in command or len(command) + first <= width:
        return command
    out: list[str] = []
    start, used = 0, first  # where the current line starts in `command`, and what the line holds before that
    good: tuple[int, bool] | None = None  # the last place on this line to break at a space
    any_: tuple[int, bool] | None = None  # the last place on this line to break at all
    for position, between, at_space in [*_breaks(command), (len(command), False, False)]:
        if position - start + used > width and (good or any_) is not None:
            cut, cut_between = good or any_  # type: ignore[misc]
            out.append(command[start:cut] + (_BETWEEN_WORDS if cut_between else _IN_QUOTES))
            start, used = (cut + 1, len(INDENT)) if cut_between else (cut, 1)
            good = any_ = None
        if position >= len(command) or position <= start:
            continue
        any_ = (position, between)
        # a space ends a line better than the middle of a word, unless it leaves the line less than half full
        if at_space and position - start + used > width // 2:
            good = any_
    out.append(command[start:])
    return "".join(out)


def unwrap(text: str) -> str:
    """The commands in ``text`` (printed by :func:`wrap`) back on one line each."""
    return re.sub(r" \\\n {4}", " ", text.replace(_IN_QUOTES, ""))


def filled(line: str, indent: int, head: str = "") -> str:
    """A long line of text (not a command) on lines of at most ``WIDTH`` characters, after ``head`` on the first and
    its continuation lines indented by ``indent`` spaces; words are never broken, so a path or URL stays whole."""
    return textwrap.fill(line, WIDTH, initial_indent=head, subsequent_indent=" " * indent, break_long_words=False, break_on_hyphens=False)
