"""A full disk through REST and the notebook's magics: one coded answer, nothing half made.

The workspace is on a real 16 MiB tmpfs (``tests.mounts``), filled to the last byte. REST
answers ``507`` with the ``disk-full`` code naming the folder (the documented response, checked
against the OpenAPI schema), ``%relay`` raises one line ending in ``[disk-full]``; neither
leaves a run folder without its record or a run ``running``, and with the space back the same
request or magic works. The CLI's commands are ``test_disk_full``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from relay_notebook.workspace import Workspace
from tests.integration.test_rest_api import start_server, stop_server
from tests.mounts import fill, tmpfs
from tests.relays import relay_source
from tests.shells import relay_shell


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs holding the workspace ``relays/`` with the ``five`` relay saved."""
    with tmpfs(tmp_path / "disk", "16m") as where:
        Workspace(where / "relays").save_draft("five", relay_source("five"))
        yield where


def _unrecorded(home: Path) -> list[Path]:
    return [p for p in home.glob("*/runs/iteration-*-hook") if not (p / "run.json").is_file()]


def test_rest_on_a_full_disk_answers_507_disk_full(disk: Path) -> None:
    """Starting a run and publishing a release: 507 ``disk-full`` naming the workspace; no
    run or release is made; freed, the same run starts and succeeds."""
    server = start_server(disk)
    try:
        filler = fill(disk)
        body = {"input": {"n": 2}}
        started = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body=body)
        assert started.status == 507, started.body
        error = started.body["error"]
        assert error["code"] == "disk-full" and str(server.home) in error["message"], error
        published = server.call("POST", "/relays/{name}/releases", {"name": "five"})
        assert published.status == 507, published.body
        assert published.body["error"]["code"] == "disk-full", published.body
        assert server.call("GET", "/runs").body == [] and _unrecorded(server.home) == []
        made = [p.name for p in (server.home / "five").glob("releases/*") if p.name != ".lock"]
        assert made == [], made  # (the folder's lock file may be there: it is no release)
        filler.unlink()
        again = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body=body)
        assert again.status == 202, again.body
        run = server.finish(again.body["run_id"])
        assert run["status"] == "succeeded" and run["result"] == {"total": 10}, run
    finally:
        stop_server(server)


@pytest.fixture
def shell(disk: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fresh IPython shell with the extension, its workspace on the tmpfs."""
    with relay_shell(disk / "relays", monkeypatch) as ip:
        yield ip


def test_a_magic_on_a_full_disk_is_one_coded_line(disk: Path, shell: Any) -> None:
    """``%relay run`` and a ``%%relay`` cell: one line ending in ``[disk-full]`` naming the
    workspace, no traceback of the kit's; freed, ``%relay run`` succeeds."""
    home = disk / "relays"
    filler = fill(disk)
    with pytest.raises(UsageError) as ran:
        shell.run_line_magic("relay", "run five --input '{\"n\": 2}' --wait")
    line = str(ran.value)
    assert len(line.splitlines()) == 1 and line.endswith("[disk-full]"), line
    assert str(home) in line and "Traceback" not in line, line
    with pytest.raises(UsageError) as saved:
        shell.run_cell_magic("relay", "other --no-graph", relay_source("five"))
    assert str(saved.value).endswith("[disk-full]"), saved.value
    assert _unrecorded(home) == [] and not (home / "other" / "relay.py").exists()
    filler.unlink()
    assert shell.run_line_magic("relay", "run five --input '{\"n\": 2}' --wait") == {"total": 10}
