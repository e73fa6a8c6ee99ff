"""The CLI is a table: every subcommand the parser offers has a handler, and no handler is left without one."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from mlperf_wf import cli


def test_every_subcommand_has_its_handler_and_every_handler_its_subcommand():
    parser = cli.build_parser()
    subcommands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction)).choices
    assert set(subcommands) == set(cli.COMMANDS)


def test_a_handler_s_return_value_is_the_exit_status(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # main changes into --root; monkeypatch changes back
    monkeypatch.setitem(cli.COMMANDS, "check", lambda args: 7)
    assert cli.main(["--root", str(tmp_path), "check"]) == 7
    monkeypatch.setitem(cli.COMMANDS, "check", lambda args: None)
    assert cli.main(["--root", str(tmp_path), "check"]) == 0


def test_version_prints_the_package_s_version(capsys):
    from importlib.metadata import version

    try:
        cli.main(["--version"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert capsys.readouterr().out.strip() == f"mlperf-wf {version('mlperf-workflow')}"


def test_main_leaves_the_caller_s_working_folder_as_it_found_it(monkeypatch, tmp_path):
    # main runs in process (tests, `mlperf-wf` called from a rule's run: block); a folder changed for --root and left
    # so made every later catalog lookup (relative to the working folder) find no datasets at all
    monkeypatch.setitem(cli.COMMANDS, "check", lambda args: None)
    before = Path.cwd()
    assert cli.main(["--root", str(tmp_path), "check"]) == 0
    assert Path.cwd() == before


def test_the_top_help_lists_the_commands_people_type_and_names_the_rules_steps_apart(capsys):
    try:
        cli.main(["--help"])
    except SystemExit as exit_:
        assert exit_.code == 0
    text = capsys.readouterr().out
    listed = set(re.findall(r"^    ([a-z][a-z-]+)(?:  |\n)", text, flags=re.MULTILINE))
    assert listed == set(cli.PEOPLE_COMMANDS), listed
    steps = " ".join(text.split("run by the workflow's rules", 1)[1].split())
    assert all(f" {name}" in steps for name in set(cli.COMMANDS) - set(cli.PEOPLE_COMMANDS))
    assert "``" not in text and "{" not in text.split("\n", 1)[0], "no markup, no wall of choices in the usage line"
    # every rule step still runs and has its own help
    assert cli.build_parser().parse_args(["merge-mllog", "result.txt"]).command == "merge-mllog"


def _every_help(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    """The -h text of the parser and of every subcommand under it (``bundle export``, ``node-check probe``), by the
    words that reach it."""
    texts = {words: parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                texts.update(_every_help(subparser, (*words, name)))
    return texts


def test_no_command_s_help_shows_markup():
    texts = _every_help(cli.build_parser())
    assert {words[0] for words in texts if words} == set(cli.COMMANDS)
    assert ("bundle", "export") in texts and ("node-check", "verdict") in texts and ("system", "probe") in texts
    marked = {" ".join(words): line.strip() for words, text in texts.items() for line in text.splitlines() if re.search(r"``|:[a-z]+:`", line)}
    assert not marked, marked


def test_every_command_s_help_runs_and_exits_0(capsys):
    for words in _every_help(cli.build_parser()):
        try:
            cli.main([*words, "-h"])
        except SystemExit as exit_:
            assert exit_.code == 0, words
        assert capsys.readouterr().out.startswith("usage: mlperf-wf"), words


def test_each_command_is_registered_once_in_its_stage_s_module():
    names = [command.name for command in cli.REGISTERED]
    assert len(names) == len(set(names)) == len(cli.COMMANDS)
    for command in cli.REGISTERED:
        assert command.help and "``" not in command.help and "\n" not in command.help, command.name
        assert command.run.__module__ in cli.COMMAND_MODULES, (command.name, command.run.__module__)
