"""The images' apt lines, executed on a base whose NVIDIA apt sources apt refuses, as the reference images' bases do.

tensorflow/tensorflow:2.4.0-gpu (bert) and pytorch 1.10's image (retinanet) list NVIDIA's CUDA repositories in
``/etc/apt/sources.list.d/cuda.list`` and ``nvidia-ml.list``, signed with the key NVIDIA rotated in April 2022: apt-get
update fails on them (``NO_PUBKEY A4B469963BF863CC``) and the image build stops. Here a Debian userland on the test's
Docker engine stands in for such a base: both lists point at a loopback repository that apt does not trust (its
Release is not signed), and the distribution archive is a trusted loopback repository holding a stand-in for each
package the definitions install.
The apt line of each definition (the Dockerfile's ``RUN``, the Apptainer definition's ``%post`` up to it) runs there as
written; the same line without its ``rm -f`` must fail, so the base really reproduces the fault.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import DOCKER_IMAGE, needs_docker

pytestmark = needs_docker

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ("bert", "retinanet")
"""The images whose bases carry NVIDIA's CUDA apt sources."""
NVIDIA_LISTS = ("cuda.list", "nvidia-ml.list")


def dockerfile_apt_line(path: Path) -> str:
    """The ``RUN`` instruction that runs ``apt-get update``, its continuation lines joined as Docker joins them."""
    text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
    instructions = re.split(r"\n(?=[A-Z]+\s)", re.sub(r"\\\n", " ", text))
    runs = [instruction.removeprefix("RUN").strip() for instruction in instructions if instruction.startswith("RUN") and "apt-get update" in instruction]
    assert len(runs) == 1, f"{path}: {len(runs)} RUN instructions run apt-get update"
    return runs[0]


def apptainer_apt_lines(path: Path) -> str:
    """The ``%post`` section of an Apptainer definition up to its ``apt-get update`` line."""
    post = path.read_text().split("%post", 1)[1].split("\n%", 1)[0]
    lines = [line.strip() for line in post.splitlines() if line.strip() and not line.strip().startswith("#")]
    last = next(i for i, line in enumerate(lines) if "apt-get update" in line)
    return "\n".join(lines[: last + 1])


def _flat_repository(folder: Path, debs: list[Path]) -> None:
    """A flat apt repository (``deb URL ./``): the packages, their ``Packages`` index and an unsigned ``Release``."""
    folder.mkdir(parents=True)
    stanzas = []
    for deb in debs:
        target = folder / deb.name
        target.write_bytes(deb.read_bytes())
        control = subprocess.run(["dpkg-deb", "--field", str(target)], capture_output=True, text=True, check=True).stdout.strip()
        data = target.read_bytes()
        stanzas.append(f"{control}\nFilename: ./{deb.name}\nSize: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n")
    packages = "\n".join(stanzas).encode()
    (folder / "Packages").write_bytes(packages)
    digest = f" {hashlib.sha256(packages).hexdigest()} {len(packages)} Packages"
    (folder / "Release").write_text(f"Origin: stand-in\nLabel: stand-in\nDate: Thu, 01 Jan 2026 00:00:00 UTC\nSHA256:\n{digest}\n")


def installed_packages(line: str) -> list[str]:
    """The packages an ``apt-get install`` in ``line`` names."""
    found = []
    for command in re.findall(r"apt-get install ([^&\n;]*)", line):
        found += [word for word in command.split() if not word.startswith("-")]
    return found


def _stand_in_package(name: str, out: Path) -> Path:
    """A package of nothing but a marker file, standing in for the distribution's ``name``."""
    root = out / f"{name}-stand-in"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: 99:0.0-stand-in\nArchitecture: all\nMaintainer: mlperf-workflow tests <tests@invalid>\n"
        f"Description: stand-in for the distribution's {name} (tests only)\n"
    )
    (root / "usr/share/stand-in").mkdir(parents=True)
    (root / "usr/share/stand-in" / name).write_text("from the trusted archive\n")
    deb = out / f"{name}_0.0-stand-in_all.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(deb)], capture_output=True, check=True)
    return deb


def _definitions() -> list[tuple[str, str]]:
    return [(image, definition) for image in IMAGES for definition in ("Dockerfile", "Apptainer.def")]


def apt_line(image: str, definition: str) -> str:
    path = ROOT / "src/mlperf_wf/benchmarks" / image / "container" / definition
    return dockerfile_apt_line(path) if definition == "Dockerfile" else apptainer_apt_lines(path)


@pytest.fixture(scope="module")
def repositories(tmp_path_factory) -> Iterator[Path]:
    """Both repositories served on loopback; yields the folder of the base's apt source lists pointing at them."""
    served = tmp_path_factory.mktemp("apt")
    debs = tmp_path_factory.mktemp("debs")
    names = sorted({name for image, definition in _definitions() for name in installed_packages(apt_line(image, definition))})
    _flat_repository(served / "archive", [_stand_in_package(name, debs) for name in names])
    _flat_repository(served / "cuda", [])
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    lists = tmp_path_factory.mktemp("lists")
    (lists / "archive.list").write_text(f"deb [trusted=yes] {url}/archive ./\n")
    for name in NVIDIA_LISTS:
        (lists / name).write_text(f"deb {url}/cuda ./\n")
    try:
        yield lists
    finally:
        server.shutdown()


def run_on_the_stand_in_base(docker_host: dict, lists: Path, line: str) -> subprocess.CompletedProcess:
    """``line`` as an image build runs it (``/bin/sh -c``, stopping at the first failure) on the stand-in base: the
    Debian userland with its own archive replaced by the loopback ones and NVIDIA's two lists in place."""
    base = "rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* && cp /stand-in-lists/*.list /etc/apt/sources.list.d/"
    argv = ["docker", "run", "--rm", "--network", "host", "-v", f"{lists}:/stand-in-lists:ro", DOCKER_IMAGE]
    installed = " ".join(f"/usr/share/stand-in/{name}" for name in installed_packages(line))
    # a subshell stopping at its first failing command, ending with the last command's status, as a RUN or %post does
    script = f"{base} || exit 99\n( set -e\n{line}\n) || exit $?\nls {installed}"
    return subprocess.run([*argv, "sh", "-c", script], capture_output=True, text=True, env=docker_host, timeout=300, check=False)


@pytest.mark.parametrize(("image", "definition"), _definitions())
def test_the_apt_line_runs_on_a_base_whose_nvidia_sources_apt_refuses(docker_host, repositories, image, definition):
    line = apt_line(image, definition)
    assert installed_packages(line), f"containers/{image}/{definition}: no apt-get install in {line!r}"
    ran = run_on_the_stand_in_base(docker_host, repositories, line)
    assert ran.returncode == 0, f"containers/{image}/{definition}: the apt line failed on the stand-in base:\n{line}\n{ran.stderr[-2000:]}"
    # the same line without its removal of NVIDIA's lists fails there, as on the real base
    kept = re.sub(r"rm -f /etc/apt/sources\.list\.d/cuda\.list /etc/apt/sources\.list\.d/nvidia-ml\.list\s*(&&\s*)?", "", line)
    assert kept != line, f"containers/{image}/{definition}: no removal of NVIDIA's lists in {line!r}"
    failed = run_on_the_stand_in_base(docker_host, repositories, kept)
    assert failed.returncode != 0 and "not signed" in failed.stderr, failed.stderr[-2000:]
