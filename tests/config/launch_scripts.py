"""What a reference's own launch files set for the processes of a run (tests only): environment variables, ``ulimit``
lines and launcher flags, read from the files' text without running them.

The rule, one item per name:

- an environment variable is an item where it reaches a process the script starts: ``export NAME[=value]`` (and
  ``declare -x``), a ``NAME=value`` in front of a command (``NAME=1 python ...``, ``env NAME=1 ...``), a name passed
  into a container (``srun --container-env=A,B``, ``srun --export=A,B``, ``docker run -e NAME[=value]``/``--env``) or a
  Dockerfile ``ENV``. A plain ``NAME=value`` or ``: "${NAME:=value}"`` that is never exported stays inside the script
  (it only builds the script's own command line), so it is no item: what it sets reaches the run through the flags
  and words of that command, which the plan's command accounts for;
- ``ulimit -Sn 65535`` is the item ``ulimit -n`` (the limit's letter; soft or hard is in the reason);
- a Python launcher (NeMo-Run's ``pretrain_llama31.py``): the keys of a dict literal assigned to a name ending in
  ``env_vars`` (what the executor exports), ``os.environ[NAME] = ...``/``os.environ.setdefault(NAME, ...)``, and each
  keyword of a ``SlurmExecutor(...)`` call that NeMo-Run turns into an ``#SBATCH`` line (``exclusive=True`` is
  ``sbatch --exclusive``);
- a launcher's flag is ``<launcher> <flag>``: ``#SBATCH`` lines and ``sbatch`` (``sbatch --exclusive``), ``srun``,
  ``salloc``, ``accelerate launch``, ``torchrun`` (also ``python -m torch.distributed.run``/``launch``), ``docker run`` and ``mpirun``; short
  flags are named by their long spelling where the launcher has one (``srun -l`` is ``srun --label``), ``_`` in a
  torchrun flag is ``-`` (it takes both). Flags kept in a shell array or string (``PYXIS_DEFAULTS=( ... )`` then
  ``srun "${PYXIS_DEFAULTS[@]}"``) are expanded where the script defines the variable.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
ASSIGNMENT = re.compile(rf"^({NAME})(\+?=)(.*)$", re.S)

SHORT_FLAGS = {
    "srun": {"-N": "--nodes", "-n": "--ntasks", "-l": "--label", "-K": "--kill-on-bad-exit", "-A": "--account", "-p": "--partition",
             "-t": "--time", "-J": "--job-name", "-o": "--output", "-e": "--error", "-c": "--cpus-per-task", "-w": "--nodelist",
             "-x": "--exclude", "-G": "--gpus", "-u": "--unbuffered", "-W": "--wait"},
    "docker run": {"-v": "--volume", "-e": "--env", "-w": "--workdir", "-u": "--user", "-i": "--interactive", "-t": "--tty",
                   "-d": "--detach", "-p": "--publish", "--net": "--network"},
}  # fmt: skip
SHORT_FLAGS["sbatch"] = SHORT_FLAGS["salloc"] = SHORT_FLAGS["srun"]
FLAGS_WITHOUT_VALUE = {
    "srun": {"--label", "--kill-on-bad-exit", "--unbuffered", "--overlap", "--exclusive", "--container-writable", "--container-readonly",
             "--container-remap-root", "--no-container-remap-root", "--container-mount-home", "--no-container-mount-home",
             "--no-kill", "--container-entrypoint", "--no-container-entrypoint", "--interactive", "--pty"},
    "docker run": {"--rm", "--interactive", "--tty", "--detach", "--privileged", "--init", "--read-only", "-it", "-ti"},
    "accelerate launch": {"--multi-gpu", "--use-deepspeed", "--use-fsdp", "--main-training-function"},
    "torchrun": {"--standalone", "--no-python", "--run-path", "--module", "-m"},
    "mpirun": {"--allow-run-as-root", "--oversubscribe", "--bind-to-core", "--tag-output"},
}  # fmt: skip
FLAGS_WITHOUT_VALUE["sbatch"] = FLAGS_WITHOUT_VALUE["salloc"] = FLAGS_WITHOUT_VALUE["srun"]
DOCKER_ULIMITS = {"nofile": "n", "memlock": "l", "stack": "s", "core": "c", "nproc": "u"}
"""``docker run --ulimit NAME=...`` -> the ``ulimit`` letter it sets in the container."""
PASSING_ENVIRONMENT = {("srun", "--container-env"), ("srun", "--export"), ("sbatch", "--export"), ("docker run", "--env")}
"""Launcher flags whose value names variables that reach the container or the tasks."""


@dataclass
class Found:
    """The items of one launch file: item -> the lines that set it (1-based)."""

    items: dict[str, list[int]] = field(default_factory=dict)

    def add(self, item: str, line: int) -> None:
        lines = self.items.setdefault(item, [])
        if line not in lines:
            lines.append(line)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each line with its backslash continuations joined."""
    out, pending, start = [], "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def _words(text: str) -> list[str]:
    """Shell words with their quotes kept (``"${A[@]}"`` stays one word), split at ``;``, ``&&``, ``||``, ``|`` and
    ``(`` ``)`` outside quotes, each separator its own word; a ``#`` that starts a word ends the line."""
    words, word, quote, depth, i = [], "", None, 0, 0
    while i < len(text):
        char = text[i]
        if quote:
            word += char
            if char == "\\" and quote == '"' and i + 1 < len(text):
                word += text[i + 1]
                i += 1
            elif char == quote:
                quote = None
        elif char == "$" and text[i + 1 : i + 2] in ("(", "{"):
            # $( ... ) and ${ ... } stay inside the word, however nested
            opening = text[i + 1]
            closing = ")" if opening == "(" else "}"
            depth, j = 0, i + 1
            while j < len(text):
                if text[j] == opening:
                    depth += 1
                elif text[j] == closing:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            word += text[i : j + 1]
            i = j
        elif char in "'\"`":
            quote = "`" if char == "`" else char
            word += char
        elif char == "\\" and i + 1 < len(text):
            word += text[i : i + 2]
            i += 1
        elif char.isspace():
            if word:
                words.append(word)
            word = ""
        elif char == "#" and not word:
            break
        elif char == "(" and re.fullmatch(rf"{NAME}\+?=", word):
            end = text.find(")", i)  # NAME=( ... ): an array, one word
            end = len(text) - 1 if end < 0 else end
            word += text[i : end + 1]
            i = end
        elif char in ";|&()":
            if word:
                words.append(word)
                word = ""
            doubled = text[i : i + 2] in ("&&", "||", ";;", "|&")
            words.append(text[i : i + 2] if doubled else char)
            i += 1 if doubled else 0
        else:
            word += char
        i += 1
    if word:
        words.append(word)
    return words


BUILTINS = {"read", ":", "eval", "echo", "printf", "cd", "set", "shift", "test", "[", "[[", "local", "return", "exit", "source", "."}
SEPARATORS = {";", "&&", "||", "|", "|&", "&", "(", ")", ";;", "then", "do", "else", "elif", "if", "while", "until", "!", "{", "}", "time"}


def _commands(words: list[str]) -> list[list[str]]:
    """The simple commands of a line's words."""
    commands, current = [], []
    for word in words:
        if word in SEPARATORS:
            if current:
                commands.append(current)
            current = []
        else:
            current.append(word)
    if current:
        commands.append(current)
    return commands


def _unquoted(word: str) -> str:
    try:
        parts = shlex.split(word)
    except ValueError:
        return word.strip("'\"")
    return " ".join(parts)


_REFERENCE = re.compile(rf'^"?\$\{{?({NAME})(\[@\])?\}}?"?$')


class _Script:
    def __init__(self) -> None:
        self.found = Found()
        self.scalars: dict[str, str] = {}
        self.arrays: dict[str, list[str]] = {}

    def expand(self, word: str) -> list[str] | None:
        """The flags a word that names a shell variable stands for (an array's words, or a string's words when it
        holds flags); None where it is no such variable."""
        match = _REFERENCE.match(word)
        if not match:
            return None
        name = match.group(1)
        if name in self.arrays:
            return self.arrays[name]
        value = self.scalars.get(name, "")
        if value.startswith("-"):
            return value.split()
        return None

    def assignment(self, word: str, line: int, exported: bool) -> None:
        match = ASSIGNMENT.match(word)
        if not match:
            if exported and re.fullmatch(NAME, word):
                self.found.add(word, line)
            return
        name, operator, value = match.groups()
        if value.startswith("(") and value.endswith(")"):
            words = [_unquoted(item) for item in _words(value[1:-1])]
            self.arrays[name] = (self.arrays.get(name, []) if operator == "+=" else []) + words
        else:
            self.scalars[name] = _unquoted(value)
        if exported:
            self.found.add(name, line)

    def command(self, words: list[str], line: int) -> None:
        # NAME=value words in front of a command reach that command (alone they only set a script variable)
        prefix = 0
        while prefix < len(words) and ASSIGNMENT.match(words[prefix]):
            prefix += 1
        # a builtin (`IFS=, read ...`) starts no process: its prefix stays in the shell
        reaches = prefix < len(words) and words[prefix] not in BUILTINS
        for word in words[:prefix]:
            self.assignment(word, line, exported=reaches)
        words = words[prefix:]
        while words and words[0] in ("exec", "command", "nohup", "sudo"):
            words = words[1:]
        match = _REFERENCE.match(words[0]) if words else None
        if match and self.scalars.get(match.group(1), "").strip():
            words = [*_words(self.scalars[match.group(1)]), *words[1:]]  # DOCKEREXEC="docker run ..."; ${DOCKEREXEC} image cmd
        if not words:
            return
        head = words[0]
        if head in ("export", "declare", "typeset", "readonly", "local"):
            exported = head == "export" or any(word.startswith("-") and "x" in word for word in words[1:])
            for word in words[1:]:
                if not word.startswith("-"):
                    self.assignment(word, line, exported)
            return
        if head == "env":
            rest = [word for word in words[1:] if not word.startswith("-")]
            for word in rest:
                if not ASSIGNMENT.match(word):
                    self.command(rest[rest.index(word) :], line)
                    break
                self.assignment(word, line, exported=True)
            return
        if head in ("bash", "sh") and words[1:2] == ["-c"] and len(words) > 2:
            # the line a launcher's task runs (srun ... bash -c "..."): its own script
            for number, inner in _logical_lines(_unquoted(words[2])):
                for command in _commands(_words(inner)):
                    self.command(command, line + number - 1)
            return
        if head == "ulimit":
            for word in words[1:]:
                if word.startswith("-"):
                    letters = word[1:].replace("S", "").replace("H", "")
                    for letter in letters:
                        self.found.add(f"ulimit -{letter}", line)
            return
        self.launcher(words, line)

    def launcher(self, words: list[str], line: int) -> None:
        for start, word in enumerate(words):
            base = _unquoted(word).rsplit("/", 1)[-1]
            name = None
            if base in ("srun", "sbatch", "salloc", "torchrun", "mpirun"):
                name, rest = base, words[start + 1 :]
            elif base == "accelerate" and words[start + 1 : start + 2] == ["launch"]:
                name, rest = "accelerate launch", words[start + 2 :]
            elif base == "docker" and words[start + 1 : start + 2] == ["run"]:
                name, rest = "docker run", words[start + 2 :]
            elif base.startswith("python") and words[start + 1 : start + 3] in (["-m", "torch.distributed.run"], ["-m", "torch.distributed.launch"]):
                name, rest = "torchrun", words[start + 3 :]
            if name:
                command = self.flags(name, rest, line)
                if command:
                    self.command(command, line)  # srun ... torchrun ..., or srun bash -c "..." is left alone
                return

    def flags(self, launcher: str, words: list[str], line: int) -> list[str]:
        """Record the launcher's flags; the words after them (the command it starts)."""
        queue = list(words)
        while queue:
            word = queue.pop(0)
            expanded = self.expand(word)
            if expanded is not None:
                queue[:0] = expanded
                continue
            word = _unquoted(word)
            if not word.startswith("-") or word == "-":
                return [word, *queue]
            flag, equals, value = word.partition("=")
            short = SHORT_FLAGS.get(launcher, {})
            if launcher == "docker run" and re.fullmatch(r"-[a-z]{2,}", flag) and all(short.get(f"-{c}") in FLAGS_WITHOUT_VALUE[launcher] for c in flag[1:]):
                queue[:0] = [f"-{c}" for c in flag[1:]]  # -it: several one-letter switches
                continue
            if not flag.startswith("--") and len(flag) > 2 and flag[:2] in SHORT_FLAGS.get(launcher, {}) and not equals:
                flag, equals, value = flag[:2], "=", flag[2:]  # -N4: a short flag with its value attached
            flag = SHORT_FLAGS.get(launcher, {}).get(flag, flag)
            if launcher in ("torchrun", "accelerate launch"):
                flag = flag.replace("_", "-")
            self.found.add(f"{launcher} {flag}", line)
            if not equals and flag not in FLAGS_WITHOUT_VALUE.get(launcher, set()) and queue:
                value = _unquoted(queue.pop(0))
            if (launcher, flag) == ("docker run", "--ulimit") and value.partition("=")[0] in DOCKER_ULIMITS:
                self.found.add(f"ulimit -{DOCKER_ULIMITS[value.partition('=')[0]]}", line)
            if (launcher, flag) in PASSING_ENVIRONMENT:
                for passed in value.split(","):
                    name = passed.partition("=")[0]
                    if re.fullmatch(NAME, name) and name not in ("ALL", "NONE"):
                        self.found.add(name, line)
        return []


def shell_items(text: str) -> Found:
    """The items of a shell script (``run.sub``, ``run_and_time.sh``, ``config_*.sh``)."""
    script = _Script()
    for number, line in _logical_lines(text):
        stripped = line.strip()
        if stripped.startswith("#SBATCH"):
            script.flags("sbatch", _words(stripped[len("#SBATCH") :]), number)
            continue
        for command in _commands(_words(line)):
            script.command(command, number)
    return script.found


def dockerfile_items(text: str) -> Found:
    """The ``ENV`` names of a Dockerfile (``ENV A=1 B=2`` and the older ``ENV A 1``)."""
    found = Found()
    for number, line in _logical_lines(text):
        words = line.split(None, 1)
        if len(words) < 2 or words[0].upper() != "ENV":
            continue
        body = words[1].strip()
        if "=" not in body.split()[0]:
            found.add(body.split()[0], number)
            continue
        for word in shlex.split(body, posix=True):
            name = word.partition("=")[0]
            if re.fullmatch(NAME, name):
                found.add(name, number)
    return found


SLURM_EXECUTOR_SBATCH = ("account", "partition", "nodes", "ntasks_per_node", "gpus_per_node", "cpus_per_task", "cpus_per_gpu",
                         "mem", "mem_per_cpu", "exclusive", "gres", "time", "job_name", "qos", "constraint", "exclude")  # fmt: skip
"""Keywords of NeMo-Run's ``SlurmExecutor`` that it writes as ``#SBATCH --keyword`` (``_`` as ``-``)."""


def python_items(text: str) -> Found:
    """The items of a Python launcher (see the module docstring)."""
    found = Found()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(isinstance(target, ast.Name) and target.id.endswith("env_vars") for target in node.targets):
                for key in node.value.keys:
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        found.add(key.value, key.lineno)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and ast.unparse(target.value) == "os.environ" and isinstance(target.slice, ast.Constant):
                    found.add(str(target.slice.value), node.lineno)
        elif isinstance(node, ast.Call):
            called = ast.unparse(node.func)
            if called == "os.environ.setdefault" and node.args and isinstance(node.args[0], ast.Constant):
                found.add(str(node.args[0].value), node.lineno)
            elif called.endswith("SlurmExecutor"):
                for keyword in node.keywords:
                    if keyword.arg in SLURM_EXECUTOR_SBATCH:
                        found.add(f"sbatch --{keyword.arg.replace('_', '-')}", keyword.value.lineno)
    return found


def is_dockerfile(path: Path) -> bool:
    return path.name.startswith("Dockerfile") or path.suffix == ".dockerfile"


def items(path: Path) -> Found:
    """The items of one launch file."""
    text = path.read_text(errors="replace")
    if is_dockerfile(path):
        return dockerfile_items(text)
    return python_items(text) if path.suffix == ".py" else shell_items(text)
