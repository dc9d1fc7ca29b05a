"""The typed run record: old run.json files read with the values they ran with, nothing lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from relay_notebook.errors import RunRecordDamagedError
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.run_record import MAX_ATTEMPTS, RunRecord

OLD: dict[str, Any] = {  # as the first releases wrote it: no budget, durability, model or id
    "run_id": "invoice-1",
    "relay": "invoice",
    "status": "interrupted",
    "code_dir": "/x",
    "app_version": "abc",
    "bindings": {"source": "abc"},
    "created_at": 1.0,
    "deadline_ms": 2.0,
    "input": {},
    "attempts": [{"attempt": 1, "started_at": 1.5, "reused": [1, "x"], "pid": 42, "odd": 7}],
    "from_the_future": {"kept": True},
}


def _folder(tmp_path: Path, data: Any) -> RunFolder:
    folder = RunFolder("invoice", 1, tmp_path)
    folder.meta.write_text(json.dumps(data))
    return folder


def test_an_old_record_reads_with_the_defaults_it_ran_with(tmp_path: Path) -> None:
    """Fields older runs lack take the values those runs had; bad ids in a list are skipped."""
    record = RunRecord.load(_folder(tmp_path, OLD))
    assert record.max_attempts == MAX_ATTEMPTS and record.durable is True
    assert record.workflow_id == "invoice-1" and not record.has_default_model
    attempt = record.attempts[0]
    assert (attempt.attempt, attempt.reused, attempt.pid, attempt.ended) == (1, [1], 42, False)


def test_a_rewrite_keeps_every_key_it_read(tmp_path: Path) -> None:
    """Keys this version does not model survive an attempt's end being written."""
    folder = _folder(tmp_path, OLD)
    record = RunRecord.load(folder)
    record.attempts[0].end(status="interrupted", returncode=-9, executed=[2], reused=[1],
                           ended_at=3.0)  # fmt: skip
    record.save(folder)
    again = json.loads(folder.meta.read_text())
    assert again["from_the_future"] == {"kept": True} and again["attempts"][0]["odd"] == 7
    assert RunRecord.load(folder).attempts[0].ended_at == 3.0


def test_a_damaged_record_names_the_file(tmp_path: Path) -> None:
    """A record without its attempts is refused with the file named, as run.json always was."""
    folder = _folder(tmp_path, {k: v for k, v in OLD.items() if k != "attempts"})
    with pytest.raises(RunRecordDamagedError, match=r"run\.json has no 'attempts'"):
        RunRecord.load(folder)
