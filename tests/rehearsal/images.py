"""The rehearsal's images (tests only): a folder per image for the enroot stand-in (``tests/rehearsal/enroot.py``).

An image is what the benchmark's Dockerfile (``<its folder>/container/Dockerfile``) puts over its base image: the
reference's files where its ``RUN ... cp -r`` line puts them (:attr:`Rehearsal.image_files`), every ``COPY`` of the
Dockerfile (the start-up hooks, the round patches: from the repository root, the build context), and every ``ENV``
(expanded as Docker expands them at build time). The base image's software (CUDA, PyTorch, NeMo ...) is not there:
this machine's userland and venv stand in for it. The rehearsal adds its probe's start-up hook last in
``MLPERF_WF_HOOKS`` and the folder the probe writes its records into.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.rehearsal import probe
from tests.rehearsal.enroot import image_key
from tests.rehearsal.spec import REFERENCE_SOURCES, ROOT, Rehearsal

HOOK_SHIM = '''"""The rehearsal probe's start-up hook (tests/rehearsal/probe.py), loaded first by sitecustomize."""
import sys

sys.path.insert(0, {root!r})
from tests.rehearsal import probe  # noqa: E402

probe.start()
'''


def _expand(value: str, env: dict[str, str]) -> str:
    """Docker's build-time expansion of ``$VAR``, ``${VAR}``, ``${VAR:+word}`` and ``${VAR:-word}``."""

    def replace(match: re.Match) -> str:
        name, operator, word = match.group(1) or match.group(4), match.group(2), match.group(3)
        current = env.get(name, "")
        if operator == ":+":
            return _expand(word, env) if current else ""
        if operator == ":-":
            return current or _expand(word, env)
        return current

    return re.sub(r"\$\{(\w+)(?:(:[+-])([^}]*))?\}|\$(\w+)", replace, value)


def dockerfile_image(dockerfile: Path, base_env: dict[str, str] | None = None) -> tuple[list[tuple[str, str]], dict[str, str], str]:
    """(COPY source, destination) pairs, the ENV an image ends with (starting from its base image's ``base_env``, which
    the ENV lines expand, e.g. ``${PYTHONPATH:+:$PYTHONPATH}``), and its last WORKDIR."""
    copies, env, workdir = [], dict(base_env or {}), "/"
    for instruction, rest in _instructions(dockerfile):
        if instruction == "COPY":
            parts = shlex.split(rest)
            copies += [(source, parts[-1]) for source in parts[:-1] if not source.startswith("--")]
        elif instruction == "ENV":
            for assignment in shlex.split(rest):
                name, _, value = assignment.partition("=")
                env[name] = _expand(value, env)
        elif instruction == "WORKDIR":
            workdir = rest.strip()
    return copies, env, workdir


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, the rest of its line) of a Dockerfile, continued lines joined."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    found = []
    for line in text.splitlines():
        words = line.strip().split(None, 1)
        if len(words) == 2 and not words[0].startswith("#"):
            found.append((words[0].upper(), words[1]))
    return found


def run_build_lines(rehearsal: Rehearsal, dockerfile: Path, layer: Path, workdir: str) -> None:
    """The Dockerfile's ``RUN`` lines the rehearsal builds (``Rehearsal.image_build``), in the layer at ``WORKDIR``, with
    this interpreter's folder first on ``PATH`` (its packages stand for the image's, e.g. pybind11 for a Makefile's
    ``python3 -m pybind11``)."""
    lines = {rest.strip() for instruction, rest in _instructions(dockerfile) if instruction == "RUN"}
    for command in rehearsal.image_build:
        if command not in lines:
            raise ValueError(f"{rehearsal.benchmark}: image_build {command!r} is not a RUN line of {dockerfile}")
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        done = subprocess.run(["bash", "-c", command], cwd=layer / workdir.lstrip("/"), env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{rehearsal.benchmark}: RUN {command} failed in the rehearsal image: {done.stderr.strip()[-600:]}")


def _copy(source: Path, target: Path) -> None:
    """Hard links where possible (the image is copy-on-write in the container)."""
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True, copy_function=_link_or_copy)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        _link_or_copy(source, target)


def _link_or_copy(source: str | Path, target: str | Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def build_image(rehearsal: Rehearsal, reference: str, images: Path, records: Path, fail: str = "") -> Path:
    """The image folder for ``reference`` (the image name the plan starts), with the probe's records at ``records``."""
    folder = images / image_key(reference)
    if folder.exists():
        shutil.rmtree(folder)
    layer = folder / "layer"
    layer.mkdir(parents=True)
    for container_path, source in rehearsal.image_files.items():
        _copy(REFERENCE_SOURCES / source, layer / container_path.lstrip("/"))
    for container_path, source in rehearsal.image_tools.items():
        _copy(ROOT / source, layer / container_path.lstrip("/"))
    dockerfile = ROOT / "src/mlperf_wf/benchmarks" / rehearsal.benchmark / "container" / "Dockerfile"
    copies, env, workdir = dockerfile_image(dockerfile, rehearsal.image_env)
    run_build_lines(rehearsal, dockerfile, layer, workdir)
    for source, destination in copies:
        _copy(ROOT / source, layer / destination.lstrip("/"))
    shim = layer / "opt" / "mlperf-wf" / "rehearsal" / "mlperf_wf_rehearsal.py"
    shim.parent.mkdir(parents=True)
    shim.write_text(HOOK_SHIM.format(root=str(ROOT)))
    env["PYTHONPATH"] = ":".join(filter(None, [str(shim.parent).replace(str(layer), ""), env.get("PYTHONPATH", "")]))
    # last: the round patches register their import hooks first, and the probe may end the process at its import
    env["MLPERF_WF_HOOKS"] = ",".join(filter(None, [env.get("MLPERF_WF_HOOKS", ""), "mlperf_wf_rehearsal"]))
    env[probe.BENCHMARK_VARIABLE] = rehearsal.benchmark
    env[probe.RECORDS_VARIABLE] = str(records)
    env[probe.ENTRY_VARIABLE] = ",".join(rehearsal.entry)
    # the reference's code: its files, and what the Dockerfile copies beside them (round patches, hooks); a folder
    # ends with "/" so that its name is no prefix of another's
    sources = {*rehearsal.image_files, *(destination for _, destination in copies)}
    env[probe.SOURCES_VARIABLE] = ",".join(sorted(f"{path.rstrip('/')}/" if (layer / path.lstrip("/")).is_dir() else path for path in sources))
    if fail:
        env[probe.FAIL_VARIABLE] = fail
    records.mkdir(parents=True, exist_ok=True)
    described = {"env": env, "workdir": workdir, "binds": [str(records)]}
    (folder / "image.json").write_text(json.dumps(described, indent=1))
    return folder


def layer_digest(rehearsal: Rehearsal) -> str:
    """A digest naming the image (its sources and definition), as a registry's digest names a pushed image."""
    digest = hashlib.sha256()
    sources = [sorted(rehearsal.image_files.items()), sorted(rehearsal.image_tools.items()), sorted(rehearsal.image_env.items())]
    digest.update(json.dumps([rehearsal.benchmark, *sources]).encode())
    digest.update((ROOT / "src/mlperf_wf/benchmarks" / rehearsal.benchmark / "container" / "Dockerfile").read_bytes())
    return f"sha256:{digest.hexdigest()}"


def push_docker_image(folder: Path, name: str, docker_env: dict[str, str]) -> tuple[str, str]:
    """A Docker image of an image folder (the Debian userland of the tests' engine + the layer + the image's ENV and
    WORKDIR, with the project's venv first on PATH), pushed to ``name``'s registry; returns (name, digest)."""
    import subprocess

    from tests.conftest import DOCKER_IMAGE

    described = json.loads((folder / "image.json").read_text())
    userland = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    # the image's own PATH first (its image_env: the Python the base image's tools run with)
    env = {**described["env"], "PATH": ":".join(filter(None, [described["env"].get("PATH", ""), userland]))}
    lines = [f"FROM {DOCKER_IMAGE}", "COPY layer/ /"]
    lines += [f"ENV {key}={json.dumps(value)}" for key, value in sorted(env.items())]
    lines.append(f"WORKDIR {described['workdir']}")
    (folder / "Dockerfile").write_text("\n".join(lines) + "\n")
    tagged = f"{name}:rehearsal"
    for command in (["docker", "build", "-q", "-t", tagged, str(folder)], ["docker", "push", tagged]):
        done = subprocess.run(command, env=docker_env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    inspect = ["docker", "inspect", "--format", "{{index .RepoDigests 0}}", tagged]
    digest = subprocess.run(inspect, env=docker_env, capture_output=True, text=True, check=True).stdout.strip().split("@")[1]
    return name, digest
