"""torchx's ``parse_nnodes``, the real one and the llama31 rehearsals' stand-in (``_nemo_run._parse_nnodes``): the same
node and process counts for the same ``-j``, the same refused.

NeMo-Run's torchrun component turns ``-j`` into torchrun's ``--nnodes``/``--nproc-per-node`` through it, so a stand-in
that read it otherwise would start another world than the real job. torchx is not in the rehearsal's venv; the real
one is torchx 0.7.0 in ``.venv-reference`` (NeMo-Run's dependency, installed by ``make``).
"""

from __future__ import annotations

import json
import subprocess

from tests.reference_venv import REFERENCE_PYTHON, reference_python_with
from tests.rehearsal import nemo_run as _nemo_run

REAL = """
import json, sys
from torchx.components.dist import parse_nnodes
outcomes = []
for j in json.loads(sys.argv[1]):
    try:
        outcomes.append(list(parse_nnodes(j)))
    except ValueError:
        outcomes.append("ValueError")
print(json.dumps(outcomes))
"""

SCENARIOS = ["2x8", "1x8", "16x8", "2:4x8", "8", "0x8", "2x", "x8", "ax8", "2:x8", "2x8x1", ""]


def _stand_in(j: str) -> list | str:
    try:
        return list(_nemo_run._parse_nnodes(j))
    except ValueError:
        return "ValueError"


def test_the_stand_in_reads_j_as_torchx_does():
    reference_python_with("torchx.components.dist", "torchx")
    done = subprocess.run([str(REFERENCE_PYTHON), "-c", REAL, json.dumps(SCENARIOS)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    real = dict(zip(SCENARIOS, json.loads(done.stdout), strict=True))
    stand_in = {j: _stand_in(j) for j in SCENARIOS}
    assert stand_in == real
    assert real["2:4x8"] == [2, 4, 8, "2:4"] and real["ax8"] == "ValueError", real
