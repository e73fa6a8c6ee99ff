"""Stand-in for pyxis and enroot on the cluster in a box (tests only): runs a task in a container built from an image
folder, with the mounts, working folder and environment of the ``srun --container-*`` line.

On a GPU cluster, pyxis (a SLURM SPANK plugin) reads ``--container-image``, ``--container-mounts``,
``--container-workdir``, ``--container-env`` and friends from the ``srun`` line, and enroot starts each task in the
image's root filesystem with those mounts. This box has neither, so ``srun`` on the job's ``PATH`` is a small
stand-in (:data:`SRUN_STAND_IN`) that takes the container options off the line and hands the rest to the real
``srun``, with every task started through this module. Here a task gets what enroot gives it:

- a root filesystem of its own (a private mount namespace and ``chroot``): the *image*, which is the folder the
  rehearsal built for it (the reference's files where its Dockerfile puts them, the round patches, the start-up
  hooks, the image's ``ENV``) layered over this machine's userland (Python, the venv: the software a GPU image would
  bring), every layer copy-on-write, so the task may write anywhere (``--container-writable``) and nothing reaches
  the host but through a mount;
- the mounts exactly as written (``HOST:CONTAINER[:ro|rw]``); a container path is created in the container, as
  enroot does; a host path that does not exist fails the task, as enroot's mount hook does;
- the working folder (``--container-workdir``), which must exist in the image or a mount;
- the environment as pyxis makes it: the task's environment, then the image's ``ENV`` over it, then the names of
  ``--container-env`` taken from the task's environment again.

An image that is not in the box's image folder fails the task as an enroot import would. An image file
(``--container-image=/path/image.sqsh``: a site's imported image, ``mlperf-wf bundle import``) is unpacked from the
squashfs itself (:func:`squashfs_image`).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

IMAGES_VARIABLE = "MLPERF_WF_BOX_IMAGES"
"""Folder of the box's images: ``<key>/layer`` (the image's own files) and ``<key>/image.json`` (its ``env``)."""
INSIDE_VARIABLE = "MLPERF_WF_BOX_IN_NAMESPACE"

SRUN_STAND_IN = """#!{python}
# Stand-in for srun with the pyxis plugin (tests only; tests/rehearsal/enroot.py): the container options leave the
# line, and each task starts in its container through enroot.py; every other option goes to the real srun.
import base64, json, sys, os
options, rest, container = [], list(sys.argv[1:]), {{}}
WITH_VALUE = {{"-N", "-n", "-w", "-c", "-J", "-o", "-e", "-p", "-t", "-x", "--nodes", "--ntasks", "--nodelist"}}
while rest and rest[0].startswith("-"):
    word = rest.pop(0)
    name, _, value = word.partition("=")
    if name.startswith("--container-") or name.startswith("--no-container-"):
        container[name[2:]] = value if "=" in word else True
        continue
    options.append(word)
    if word in WITH_VALUE and rest:
        options.append(rest.pop(0))
if container.get("container-image"):
    spec = base64.b64encode(json.dumps(container).encode()).decode()
    rest = [{python!r}, {enroot!r}, spec, *rest]
os.execv("/usr/bin/srun", ["srun", *options, *rest])
"""


def write_srun_stand_in(folder: Path) -> Path:
    """An ``srun`` for the job's ``PATH`` (the folder is created)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "srun"
    path.write_text(SRUN_STAND_IN.format(python=sys.executable, enroot=str(Path(__file__).resolve())))
    path.chmod(0o755)
    return path


def image_key(reference: str) -> str:
    """The image folder's name for an image reference (enroot's ``registry#repo@digest`` or docker's form)."""
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in reference.replace("#", "/"))


def _mount(*argv: str) -> None:
    proc = subprocess.run(["mount", *argv], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"enroot stand-in: mount {' '.join(argv)}: {proc.stderr.strip()}")


def _submounts(skip: Path) -> list[str]:
    """Mount points of this namespace below ``/`` that an overlay of their parent would not show (the node's
    ``/etc/hosts`` and ``/etc/slurm``), outside /proc, /sys, /dev and the container's own folder."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == "/" or point.split("/")[1] in ("proc", "sys", "dev") or point.startswith(str(skip)):
            continue
        points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"))


def build_root(mnt: Path, layer: Path) -> Path:
    """A root of overlays (the image's layer over each top-level folder of this machine) in a tmpfs at ``mnt``."""
    _mount("-t", "tmpfs", "tmpfs", str(mnt))
    root, upper, work = mnt / "root", mnt / "upper", mnt / "work"
    for folder in (root, upper, work):
        folder.mkdir()
    names = {entry.name for entry in os.scandir("/")} | ({entry.name for entry in os.scandir(layer)} if layer.is_dir() else set())
    for name in sorted(names):
        host, mine = Path("/") / name, layer / name
        if name in ("proc", "sys", "dev"):
            (root / name).mkdir()
            _mount("--rbind", str(host), str(root / name))
            continue
        if host.is_symlink() and not mine.exists():
            os.symlink(os.readlink(host), root / name)
            continue
        lower = [str(path) for path in (mine, host) if path.is_dir() and not path.is_symlink()]
        if not lower:
            continue
        for folder in (root, upper, work):
            (folder / name).mkdir()
        options = f"lowerdir={':'.join(lower)},upperdir={upper / name},workdir={work / name}"
        _mount("-t", "overlay", "overlay", "-o", options, str(root / name))
    for point in _submounts(mnt):
        target = root / point.lstrip("/")
        if not target.exists():
            continue
        _mount("--bind", point, str(target))
    return root


AMD_DEVICES = ("/dev/kfd", "/dev/dri")
"""The ROCm devices an AMD image's line mounts (mlperf_wf.plan.launch.AMD_DEVICES)."""


def _bind(root: Path, host: str, container: str, mode: str) -> None:
    source = Path(host)
    if not source.exists() and host in AMD_DEVICES and host == container:
        # the box's GPUs are count-only: a ROCm device the node lacks is not bound (as the NVIDIA hook stand-in binds none)
        print(f"enroot stand-in: {host} does not exist on this node (count-only GPUs): not bound", file=sys.stderr)
        return
    if not source.exists():
        raise SystemExit(f"enroot stand-in: mount source {host} does not exist (container path {container})")
    target = root / container.lstrip("/")
    if source.is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch(exist_ok=True)
    _mount("--rbind", str(source), str(target))
    if mode == "ro":
        _mount("-o", "remount,bind,ro", str(target))


RECORDS_VARIABLE = "MLPERF_WF_REHEARSAL_RECORDS"
"""The rehearsal probe's record folder, in an image's environment (tests.rehearsal.probe.RECORDS_VARIABLE)."""


def squashfs_image(path: Path, images: Path) -> Path:
    """The image folder of an enroot squashfs (``--container-image=/path/image.sqsh``, as pyxis starts a site's image
    file): unpacked once (concurrent tasks race to a rename, the loser's copy is dropped), its environment from
    ``/etc/environment`` as enroot reads it, and the probe's record folder bound where the environment names one."""
    folder = images / image_key(str(path))
    if (folder / "image.json").exists():
        return folder
    if not path.is_file():
        raise SystemExit(f"enroot stand-in: image file {path} does not exist (enroot would fail to start it)")
    partial = images / f".{folder.name}.{os.getpid()}"
    partial.mkdir(parents=True)  # unsquashfs makes the last folder of -d only
    done = subprocess.run(["unsquashfs", "-no-progress", "-quiet", "-d", str(partial / "layer"), str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"enroot stand-in: {path} is not a squashfs enroot can start: {done.stderr.strip()[-300:]}")
    env = dict(line.split("=", 1) for line in (partial / "layer/etc/environment").read_text().splitlines() if "=" in line)
    binds = [env[RECORDS_VARIABLE]] if RECORDS_VARIABLE in env else []
    (partial / "image.json").write_text(json.dumps({"env": env, "workdir": "/", "binds": binds}))
    try:
        partial.rename(folder)
    except OSError:
        subprocess.run(["rm", "-rf", str(partial)], check=False)
    return folder


def main(argv: list[str]) -> None:
    if os.environ.get(INSIDE_VARIABLE) != str(os.getpid()):
        # a private mount namespace: what this task mounts never reaches the node or the other tasks
        enter = ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{INSIDE_VARIABLE}=$$ exec "$@"', "sh"]
        os.execvp("unshare", [*enter, sys.executable, __file__, *argv])
    spec = json.loads(base64.b64decode(argv[0]))
    command = argv[1:]
    images = Path(os.environ[IMAGES_VARIABLE])
    reference = spec["container-image"]
    image = squashfs_image(Path(reference), images) if reference.startswith("/") else images / image_key(reference)
    if not (image / "image.json").exists():
        raise SystemExit(f"enroot stand-in: image {spec['container-image']} is not in {images} (enroot would fail to import it)")
    described = json.loads((image / "image.json").read_text())
    mnt = images / "mnt"
    root = build_root(mnt, image / "layer")
    for item in filter(None, str(spec.get("container-mounts", "")).split(",")):
        parts = item.split(":")
        host, container, mode = parts[0], parts[1] if len(parts) > 1 else parts[0], parts[2] if len(parts) > 2 else "rw"
        _bind(root, host, container, mode)
    for folder in described.get("binds", []):
        _bind(root, folder, folder, "rw")  # the rehearsal probe's record folder
    env = {**os.environ}
    env.pop(INSIDE_VARIABLE, None)
    env.update(described.get("env", {}))
    for name in filter(None, str(spec.get("container-env", "")).split(",")):
        if name in os.environ:
            env[name] = os.environ[name]
    workdir = spec.get("container-workdir") or described.get("workdir") or "/"
    os.chroot(root)
    try:
        os.chdir(workdir)
    except FileNotFoundError:
        raise SystemExit(f"enroot stand-in: container workdir {workdir} does not exist in image {spec['container-image']}") from None
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main(sys.argv[1:])
