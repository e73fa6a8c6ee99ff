"""A long shell command printed wrapped is the same command to the shell, and unwraps to the one line it was."""

from __future__ import annotations

import subprocess

from mlperf_wf.plan.shell_wrap import WIDTH, unwrap, wrap

# Every kind of word a planned command has: plain and assigned words, long single-quoted JSON with and without spaces,
# double quotes around expansions, an ANSI-C string, a subshell, a group, redirections and a comment at the end.
WORDS = " ".join(f"--flag-{i} value-{i}" for i in range(30))
JSON = '{"commit":null,"config":{"arguments":[],"benchmark":"rgat","hyperparameters":{"global_batch_size":4096}}}' * 6
SPACED = 'mlperf-wf preflight --benchmark rgat || exit 2; echo "it\'s $HOME" >&2; ' * 8
COMMAND = (
    f"x=1; printf '<%s>\\n' {WORDS} '{JSON}' --command='{SPACED}' \"${{SLURM_JOB_ID:-$(echo a b)}}\" $'tab\\there' "
    f"$(echo sub shell) && {{ printf '%s\\n' grouped words {WORDS}; }} 2>&1; (printf '%s\\n' \"$x\" {WORDS}) # a comment {WORDS}"
)


def run(command: str) -> str:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=True).stdout


def test_a_wrapped_command_runs_as_the_one_line_it_was_and_unwraps_to_it():
    wrapped = wrap(COMMAND)
    assert wrapped.count("\n") > 10
    assert run(wrapped) == run(COMMAND)
    assert unwrap(wrapped) == COMMAND
    lines = wrapped.splitlines()
    assert all(len(line) <= WIDTH + 2 for line in lines[:-1]), max(map(len, lines))
    assert lines[-1].endswith(f"# a comment {WORDS}"), "a comment is never broken"


def test_a_short_command_and_the_first_line_s_prefix():
    assert wrap("echo short") == "echo short"
    wrapped = wrap(WORDS, first=len("Shell command: "))
    assert len("Shell command: " + wrapped.splitlines()[0]) <= WIDTH + 2
    assert unwrap(wrapped) == WORDS
