"""Build-time fix of the gpt_oss_20b reference's Dockerfile.nvidia (mlcommons/training aa344c7,
small_llm_moe_pretraining/primus), run on a checkout of the reference before ``docker build``. Its ROCm
``Dockerfile`` (the image variant mi355) has the same two lines (:35, :48) and is fixed the same way.

The reference's Dockerfile cannot build as written, and would not be reproducible if it did:

1. ``RUN pip install primus_mllog-0.1.0-py3-none-any.whl`` (Dockerfile.nvidia:36) names a wheel that is not
   in the folder; the folder ships ``primus_mllog-0.1.20-py3-none-any.whl``. The line is rewritten to the
   wheel that is there (exactly one ``primus_mllog-*.whl`` must exist).
2. ``git checkout main`` of Primus (Dockerfile.nvidia:18-21) builds whatever Primus is today. It is rewritten
   to ``git checkout <commit>``, the commit given with ``--primus-commit`` (40 hex digits, no default; see
   ``src/mlperf_wf/benchmarks/gpt_oss_20b/container/Dockerfile`` for the one that matches the reference).

Every other line stays as the reference wrote it; a Dockerfile in which either line is not found exactly once
is refused, so a changed reference is noticed instead of silently half-patched. The original is kept beside
the fixed file as ``Dockerfile.nvidia.orig``.

Usage: python3 fix_reference_dockerfile.py --primus-commit <sha> <reference folder>/Dockerfile.nvidia
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

WHEEL_LINE = re.compile(r"^(RUN pip install )primus_mllog-[^\s]+\.whl[ \t]*$", re.MULTILINE)
PRIMUS_CHECKOUT = re.compile(r"(git checkout )main( && \\)$", re.MULTILINE)
COMMIT = re.compile(r"[0-9a-f]{40}")


class FixError(Exception):
    """The Dockerfile or the folder is not the one this fix was written for."""


def fixed_dockerfile(text: str, folder: Path, primus_commit: str) -> str:
    """``text`` with the wheel name that exists in ``folder`` and Primus checked out at ``primus_commit``."""
    if not COMMIT.fullmatch(primus_commit):
        raise FixError(f"--primus-commit is {primus_commit!r}; give the full 40-hex Primus commit")
    wheels = sorted(path.name for path in folder.glob("primus_mllog-*-py3-none-any.whl"))
    if len(wheels) != 1:
        raise FixError(f"{folder}: expected one primus_mllog-*-py3-none-any.whl, found {wheels or 'none'}")
    for pattern, what in ((WHEEL_LINE, "a `RUN pip install primus_mllog-*.whl` line"), (PRIMUS_CHECKOUT, "a `git checkout main && \\` line")):
        found = len(pattern.findall(text))
        if found != 1:
            raise FixError(f"expected {what} exactly once in the reference's Dockerfile, found {found}: not the Dockerfile of aa344c7")
    text = WHEEL_LINE.sub(lambda match: f"{match.group(1)}{wheels[0]}", text)
    return PRIMUS_CHECKOUT.sub(lambda match: f"{match.group(1)}{primus_commit}{match.group(2)}", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--primus-commit", required=True, help="the Primus commit to build (40 hex digits)")
    parser.add_argument("dockerfile", type=Path, help="the reference's Dockerfile.nvidia (edited in place)")
    args = parser.parse_args(argv)
    try:
        text = args.dockerfile.read_text()
        fixed = fixed_dockerfile(text, args.dockerfile.parent, args.primus_commit)
    except (OSError, FixError) as err:
        print(f"fix_reference_dockerfile: {args.dockerfile}: {err}", file=sys.stderr)
        return 2
    backup = args.dockerfile.with_name(args.dockerfile.name + ".orig")
    if not backup.exists():
        shutil.copyfile(args.dockerfile, backup)
    args.dockerfile.write_text(fixed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
