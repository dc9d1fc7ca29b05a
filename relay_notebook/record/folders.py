"""Run folders: ``relays/NAME/runs/iteration-N-hook/`` and the run ids that name them."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentworks.redact import Redactor
from relay_notebook.errors import InvalidRunIdError, RunNotFoundError, RunRecordDamagedError
from relay_notebook.workspace import Workspace, validate_relay_name
from relay_notebook.workspace.file_io import write_bytes_atomic, write_json_atomic
from relay_notebook.workspace.relay_lock import numbers_taken
from relay_notebook.workspace.vault import Vault

__all__ = [
    "RunFolder",
    "allocate_run",
    "find_run",
    "list_run_folders",
    "list_unrecorded_folders",
    "parse_run_id",
    "unrecorded_problem",
]

RUNS_DIR = "runs"
# ASCII digits only (``\d`` would read "chain-١" as chain-1), and few enough for a file name
MAX_RUN_DIGITS = 18
_FOLDER = re.compile(r"iteration-([0-9]{1,18})-hook")
_RUN_ID = re.compile(r"(?P<relay>[A-Za-z][A-Za-z0-9_-]{0,63})-(?P<n>[0-9]+)")
#: run.json fields every reader relies on, and the JSON types they must have
_REQUIRED: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "relay": (str,),
    "status": (str,),
    "code_dir": (str,),
    "app_version": (str,),
    "bindings": (dict,),
    "created_at": (int, float),
    "deadline_ms": (int, float),
    "attempts": (list,),
}


class _Below:
    """A path below a run folder, read on a ``RunFolder`` as a ``Path``."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, folder: RunFolder, owner: type[RunFolder] | None = None) -> Path:
        return folder.path.joinpath(*self.parts)


@dataclass(frozen=True)
class RunFolder:
    """Every path of one run; the run id (``invoice-3``) is also its DBOS ``workflow_id``."""

    relay: str
    number: int
    path: Path

    @property
    def run_id(self) -> str:
        return f"{self.relay}-{self.number}"

    #: the files and folders of the run folder (each a ``Path`` on an instance)
    meta = _Below("run.json")
    result = _Below("relay_result.json")
    trace = _Below("relay_trace.json")
    events = _Below("dbos_events.jsonl")
    execution = _Below("execution")
    dbos_dir = _Below(".relay_dbos")
    database = _Below(".relay_dbos", "dbos.sqlite")
    #: the relay's entry file as a run of a draft started (its flow graph is drawn on it; a
    #: release's run has its release folder); sealed from the child like run.json
    code = _Below("code", "relay.py")
    #: outside every folder the child may write: a relay must not swap the lock's inode
    lock = _Below("run.lock")
    ipc = _Below(".relay_ipc")
    journal = _Below(".relay_ipc", "journal.jsonl")
    mcp_logs = _Below(".relay_ipc", "mcp")

    def keep_code(self, data: bytes) -> None:
        """Keep ``data`` (the draft's entry file at the run's start) as the run's ``code``."""
        self.code.parent.mkdir(exist_ok=True)
        write_bytes_atomic(self.code, data)

    def damaged(self, what: Path | str, why: str) -> RunRecordDamagedError:
        """The error for a damaged file of this run: names the file, says what to do next."""
        return RunRecordDamagedError(
            f"Run {self.run_id} cannot be read: {what} {why}. The run's other files are left "
            f"as they are; restore the file from a backup, or start a new run with: relay run "
            f"{self.relay}"
        )

    def read_meta(self) -> dict[str, Any]:
        """``run.json``, checked: ``RunRecordDamagedError`` names the file if it is unusable."""
        data = self._read_json(self.meta, "is missing")
        problem = _meta_problem(data)
        if problem is not None:
            raise self.damaged(self.meta, problem)
        meta: dict[str, Any] = data
        return meta

    def read_result(self) -> Any:
        """A succeeded run's ``relay_result.json``; ``RunRecordDamagedError`` if unusable.

        Every form of a vault value in it is replaced by ``[vault:NAME]``: a run made before
        the supervisor checked what attempts leave may hold one.
        """
        secrets = Vault(self.path.parents[2]).values()  # HOME/RELAY/runs/iteration-N-hook
        result = self._read_json(self.result, "is missing although the run succeeded")
        return Redactor(secrets, encoded=True).scrub_json(result) if secrets else result

    def _read_json(self, path: Path, missing: str) -> Any:
        """The JSON value in ``path``; ``RunRecordDamagedError`` says why it cannot be read
        (``missing``: when the file is not there)."""
        try:
            return json.loads(path.read_bytes())
        except FileNotFoundError:
            raise self.damaged(path, missing) from None
        except OSError as exc:
            raise self.damaged(path, f"cannot be read ({exc.strerror})") from None
        except (ValueError, RecursionError):
            raise self.damaged(path, "is not valid JSON (truncated or overwritten?)") from None

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_json_atomic(self.meta, meta)


def _meta_problem(data: Any) -> str | None:
    """Why ``data`` is not a usable run.json, or ``None``."""
    if not isinstance(data, dict):
        return f"holds a JSON {type(data).__name__}, not an object"
    for key, types in _REQUIRED.items():
        if key not in data:
            return f"has no {key!r}"
        value = data[key]
        if not isinstance(value, types) or isinstance(value, bool):
            return f"has {key!r} of type {type(value).__name__}, not {types[0].__name__}"
    if "input" not in data:
        return "has no 'input'"
    release = data.get("release")
    if release is not None and not (
        isinstance(release, dict) and isinstance(release.get("version"), int)
    ):
        return "has a 'release' without a version number"
    for i, attempt in enumerate(data["attempts"]):
        if not isinstance(attempt, dict) or not isinstance(attempt.get("attempt"), int):
            return f"has attempts[{i}] without an attempt number"
    return None


def _runs_root(workspace: Workspace, relay: str) -> Path:
    return workspace.relay_dir(relay) / RUNS_DIR


def allocate_run(workspace: Workspace, relay: str) -> RunFolder:
    """Create the next ``iteration-N-hook`` folder atomically (mkdir decides races)."""
    root = _runs_root(workspace, relay)
    root.mkdir(parents=True, exist_ok=True)
    taken = [int(m.group(1)) for p in root.iterdir() if (m := _FOLDER.fullmatch(p.name))]
    n = max(taken, default=numbers_taken(workspace, relay)) + 1
    while True:
        path = root / f"iteration-{n}-hook"
        try:
            path.mkdir()
        except FileExistsError:
            n += 1
            continue
        folder = RunFolder(relay, n, path)
        try:
            folder.dbos_dir.mkdir()
            folder.ipc.mkdir()
            folder.execution.mkdir()
        except BaseException:  # a full disk: no half-made run folder is left
            shutil.rmtree(path, ignore_errors=True)
            raise
        return folder


def parse_run_id(run_id: str) -> tuple[str, int]:
    """``invoice-3`` → ``("invoice", 3)``; a clear error for anything else."""
    m = _RUN_ID.fullmatch(run_id.strip())
    if not m or len(m["n"]) > MAX_RUN_DIGITS:
        shown = ascii(run_id if len(run_id) <= 40 else run_id[:39] + "…")
        too_long = f" (N has at most {MAX_RUN_DIGITS} digits)" if m else ""
        raise InvalidRunIdError(
            f"{shown} is not a run id: expected RELAY-N as printed by 'relay run'{too_long}, "
            f"e.g. 'invoice-3'. List runs with: relay runs"
        )
    return validate_relay_name(m["relay"]), int(m["n"])


def find_run(workspace: Workspace, run_id: str) -> RunFolder:
    """The folder of ``run_id``; ``RunNotFoundError`` lists the relay's runs."""
    relay, n = parse_run_id(run_id)
    path = _runs_root(workspace, relay) / f"iteration-{n}-hook"
    folder = RunFolder(relay, n, path)
    if not folder.meta.is_file() and _has_run_files(folder):
        raise folder.damaged(folder.meta, _UNRECORDED)
    if not folder.meta.is_file():
        known = [f.run_id for f in list_run_folders(workspace, relay)][-5:]
        hint = f"Recent runs of {relay}: {', '.join(known)}." if known else f"{relay} has no runs."
        raise RunNotFoundError(
            f"No run {run_id!r} in workspace {workspace.home}. {hint} List runs with: "
            f"relay runs {relay}"
        )
    return folder


def _numbered_folders(workspace: Workspace, relay: str) -> list[RunFolder]:
    """Every numbered folder under the relay's runs, in number order."""
    root = _runs_root(workspace, relay)
    if not root.is_dir():
        return []
    found = [
        RunFolder(relay, int(m.group(1)), p)
        for p in root.iterdir()
        if (m := _FOLDER.fullmatch(p.name))
    ]
    return sorted(found, key=lambda f: f.number)


def list_run_folders(workspace: Workspace, relay: str) -> list[RunFolder]:
    """The relay's runs that have started, in number order."""
    return [f for f in _numbered_folders(workspace, relay) if f.meta.is_file()]


_UNRECORDED = "is missing, but the run's folder, ledger and checkpoints remain"


def _has_run_files(folder: RunFolder) -> bool:
    """Whether a folder without run.json held a run (its ledger or its database exists: both
    are made after run.json), rather than being one being made or a deleted run's."""
    return folder.events.exists() or folder.database.exists()


def list_unrecorded_folders(workspace: Workspace, relay: str) -> list[RunFolder]:
    """The relay's run folders whose run.json is gone although the run's files remain."""
    return [
        f for f in _numbered_folders(workspace, relay) if not f.meta.is_file() and _has_run_files(f)
    ]


def unrecorded_problem(folder: RunFolder) -> RunRecordDamagedError:
    """The damage of a folder ``list_unrecorded_folders`` found."""
    return folder.damaged(folder.meta, _UNRECORDED)
