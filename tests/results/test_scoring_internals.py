"""The scorer's speed-ups give exactly what mlperf-logging's own code gives."""

from __future__ import annotations

import random
import re

from mlperf_logging.compliance_checker import mlp_parser

from mlperf_wf.results.scoring import TOKEN, _FastStripRe, fast_mlperf_logging
from tests.mllogs import write_lora_log


def test_fast_strip_equals_the_regex_on_awkward_lines():
    rng = random.Random(0)
    pieces = [TOKEN, ":::MLLOG", "::", " ", "x", '{"key": "v"}', "\r", "é", ":::MLLOG  ", "[1,0]<stdout>:"]
    lines = ["", "\n", TOKEN, TOKEN + "\n", "no token here\n", f"prefix {TOKEN}a {TOKEN}b\n"]
    for _ in range(3000):
        line = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        lines.append(line + rng.choice(["", "\n"]))
    for line in lines:
        assert _FastStripRe.sub(".*" + TOKEN, TOKEN, line) == re.sub(".*" + TOKEN, TOKEN, line), repr(line)


def test_other_patterns_go_to_the_real_re():
    assert _FastStripRe.sub("a+", "b", "caaat") == "cbt"
    assert _FastStripRe().compile("x").pattern == "x"


def test_patched_parser_reads_the_same_lines(tmp_path):
    log = write_lora_log(tmp_path / "r.txt", 1, 10.0, [(3264, 0.9)])
    text = log.read_text().splitlines()
    log.write_text("\n".join(f"[{i}] noise {TOKEN}{line.removeprefix(TOKEN)}" if i % 2 else line for i, line in enumerate(text)) + "\n")
    plain, _ = mlp_parser.parse_file(str(log), ruleset="6.1.0")
    with fast_mlperf_logging():
        fast, _ = mlp_parser.parse_file(str(log), ruleset="6.1.0")
    assert [(a.key, a.timestamp, a.value) for a in plain] == [(b.key, b.timestamp, b.value) for b in fast]
    from mlperf_logging.compliance_checker.mlp_parser import ruleset_610

    assert ruleset_610.re is re, "the patch is undone on exit"
