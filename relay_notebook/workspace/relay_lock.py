"""A relay's own lock, and the run numbers a deleted relay had handed out.

Design note: a new run's folder is made while holding its relay's lock shared, and a relay is
deleted holding it exclusively, after which its folder is gone. So a run starting while its
relay is deleted either is complete before the delete looks (and goes with the relay) or finds
the draft gone: never a run folder under a relay with no draft. The lock is ``flock`` on the
relay's folder itself, so it leaves no lock file behind. The numbers a deleted relay's runs
had are kept in ``.relay_numbers.json``: a relay made again under the name never hands out a
run id (a DBOS workflow id) that named another run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from relay_notebook.errors import RelayNotFoundError
from relay_notebook.workspace.drafts import ENTRY_FILE, Workspace
from relay_notebook.workspace.file_io import write_json_atomic

__all__ = ["hold_relay", "keep_run_numbers", "numbers_taken"]

_NUMBERS = ".relay_numbers.json"


@contextlib.contextmanager
def hold_relay(workspace: Workspace, name: str, *, exclusive: bool) -> Iterator[Path]:
    """Hold relay ``name``'s lock (``exclusive``: to delete it) and yield its folder;
    ``RelayNotFoundError`` if its draft is gone once the lock is held."""
    folder = workspace.relay_dir(name)
    while True:
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            raise _gone(workspace, name) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                same = os.stat(folder).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # deleted (and made again) while we waited: lock the folder there now
        if not folder.exists():
            raise _gone(workspace, name)
    try:
        if not (folder / ENTRY_FILE).is_file():
            raise _gone(workspace, name)
        yield folder
    finally:
        os.close(fd)  # closing the descriptor lets the lock go


def _gone(workspace: Workspace, name: str) -> RelayNotFoundError:
    return RelayNotFoundError(
        f"Relay {name!r} is not in workspace {workspace.home} (it was deleted). Save it again "
        f"with a %%relay {name} cell or: relay check path/to/{name}.py"
    )


def numbers_taken(workspace: Workspace, relay: str) -> int:
    """The highest run number a deleted relay of this name handed out (0: none)."""
    try:
        data = json.loads((workspace.home / _NUMBERS).read_bytes())
    except (OSError, ValueError):
        return 0
    n = data.get(relay) if isinstance(data, dict) else None
    return n if type(n) is int and n > 0 else 0


def keep_run_numbers(workspace: Workspace, relay: str, highest: int) -> None:
    """Remember that runs up to ``highest`` of ``relay`` existed (its folder is going)."""
    if highest <= numbers_taken(workspace, relay):
        return
    path = workspace.home / _NUMBERS
    fd = os.open(workspace.home, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the workspace folder itself: no lock file left
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            data = {}
        data = data if isinstance(data, dict) else {}
        known = data.get(relay)
        data[relay] = max(highest, known if type(known) is int else 0)
        write_json_atomic(path, data)
    finally:
        os.close(fd)
