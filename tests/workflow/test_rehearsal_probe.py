"""The rehearsal probe's own records (tests/rehearsal/probe.py): a rank ended mid-write leaves no half record."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rehearsal import probe


def test_a_rank_ended_while_writing_its_record_leaves_no_half_written_record(tmp_path, monkeypatch):
    """When one rank fails, its launcher ends the others at any moment; the campaign reads every ``*.json`` record (a
    full run once failed on an empty one)."""
    monkeypatch.setenv(probe.RECORDS_VARIABLE, str(tmp_path))
    monkeypatch.setenv("SEED", "1235")
    written = Path.write_text

    def killed_mid_write(self, text, *args, **kwargs):
        written(self, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt("the process ends here")

    monkeypatch.setattr(Path, "write_text", killed_mid_write)
    with pytest.raises(KeyboardInterrupt):
        probe._write("rank-3.json", {"rank": 3, "status": 0})
    monkeypatch.setattr(Path, "write_text", written)
    assert list((tmp_path / "seed-1235").glob("*.json")) == []
    probe._write("rank-3.json", {"rank": 3, "status": 0})
    assert [path.name for path in (tmp_path / "seed-1235").glob("*.json")] == ["rank-3.json"]
