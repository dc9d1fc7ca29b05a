"""The supervisor's secret check: no stored copy of an attempt may hold a secret, in any form.

Design note: the child's ``Redactor`` guards what the relay saves, but it lives in the relay's
process, which can switch it off. So when an attempt ends, before its outcome is recorded or
shown, the supervisor looks for every secret the attempt could read (the vault's, and the
environment's that ``vault()`` falls back to) in everything the attempt could write: the paths
of its write rules (``runner.confine``), its logs, and every cell of every table of the run's
SQLite database, as stored and base64-decoded. A secret is looked for as it is, escaped and
encoded (``Needles``). A value cut in pieces is looked for, as it is, in the concatenated
strings of the ledger's events and in the concatenated strings of each table's saved values
(read out of DBOS's pickles with ``pickletools``: nothing is unpickled). Only whole values
count. A hit fails the attempt (``secret-leak``) and every copy found is replaced by
``[vault:NAME]``: files are rewritten beside themselves and renamed (a hard link the relay made
to a file elsewhere is left alone), a pickled cell becomes the pickle of the marker, and the
database is vacuumed with ``secure_delete`` so no freed page keeps the value. Symbolic links
are never followed. A PostgreSQL run's rows are not checked here (only its files).
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from agentworks.redact import MIN_SECRET_LENGTH
from relay_notebook.record.backend import Backend
from relay_notebook.runner.leak_database import (
    check_database,
    check_postgres,
    read_file,
    strings,
)
from relay_notebook.runner.leak_needles import Leak, Needles, marker
from relay_notebook.workspace.drafts import code_files

__all__ = ["Leak", "Needles", "attempt_secrets", "check_attempt", "environment_secrets"]

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_AUTH$", re.IGNORECASE)
#: an environment value with a secret-looking name shorter than this is not guarded
MIN_ENVIRONMENT_LENGTH = 8
_MAX_SOURCE = 1024 * 1024
_CHUNK = 8 * 1024 * 1024
_JSON_STRING = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)"')


# -- files --------------------------------------------------------------------------------


def _files(root: Path) -> Iterator[Path]:
    """Regular files at or beneath ``root``, never through a symbolic link."""
    if root.is_symlink() or not root.exists():
        return
    if root.is_file():
        yield root
        return
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if not path.is_symlink() and path.is_file():
                yield path


def _contains(path: Path, needles: Needles) -> tuple[str, str] | None:
    """A secret's form in the file at ``path``, read in overlapping chunks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    keep = max(needles.longest - 1, 0)
    with os.fdopen(fd, "rb") as fh:
        tail = b""
        while chunk := fh.read(_CHUNK):
            found = needles.find(tail + chunk)
            if found:
                return found
            tail = (tail + chunk)[-keep:] if keep else b""
    return None


def _rewrite(path: Path, data: bytes) -> None:
    """Replace the file at ``path`` by a new one holding ``data`` (never writing its inode)."""
    tmp = path.with_name(f".{path.name}.relay-scrub")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, path.stat().st_mode & 0o777)
    os.replace(tmp, path)


def _file_label(rel: str) -> str:
    labels = {
        "dbos_events.jsonl": "the run's ledger (dbos_events.jsonl)",
        "child/result.json": "the run's result",
        "child/outcome.json": "the attempt's outcome",
        "stdout.log": "the attempt's stdout log",
        "stderr.log": "the attempt's stderr log",
        ".relay_ipc/journal.jsonl": "the run's call journal",
    }
    return labels.get(rel) or f"the file {rel}"


def _scrub_ledger(path: Path, needles: Needles, leak: Leak) -> None:
    """A secret cut across the strings of consecutive events: those strings become markers."""
    data = read_file(path)
    # quick: JSON escapes each character alone, so the pieces' escaped texts joined hold the
    # value's escaped form; the events are parsed only then
    joined = b"".join(_JSON_STRING.findall(data))
    if not any(form in joined for form in needles.joined_forms):
        return
    lines = data.splitlines(keepends=True)
    events: list[Any] = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append(None)
    while True:
        spans: list[tuple[int, int, int]] = []  # (event, start, end) of each string
        text = []
        at = 0
        for i, event in enumerate(events):
            for s in strings(event):
                spans.append((i, at, at + len(s)))
                text.append(s)
                at += len(s)
        hit = needles.find_split("".join(text))
        if hit is None or not leak.add((hit[0], "cut across events"), _file_label(path.name)):
            return
        name, start, end = hit
        before = list(events)
        for i in {i for i, a, b in spans if a < end and b > start}:
            events[i] = _replace_strings(events[i], needles, name)
            lines[i] = (json.dumps(events[i], ensure_ascii=False) + "\n").encode()
        if events == before:  # no string of those events could be replaced: drop them
            for i in {i for i, a, b in spans if a < end and b > start}:
                events[i], lines[i] = None, b""
        _rewrite(path, b"".join(lines))


def _replace_strings(value: Any, needles: Needles, name: str) -> Any:
    """``value`` with each of its strings holding part of a secret replaced by the marker."""
    if isinstance(value, str):
        return marker(name) if any(value and value in v for _, v in needles.values) else value
    if isinstance(value, list):
        return [_replace_strings(v, needles, name) for v in value]
    if isinstance(value, dict):
        return {
            _replace_strings(k, needles, name): _replace_strings(v, needles, name)
            for k, v in value.items()
        }
    return value


# -- the check ----------------------------------------------------------------------------


def check_attempt(
    run_dir: Path,
    attempt_dir: Path,
    writable: Iterable[Path],
    database: Path,
    secrets: Mapping[str, str],
    *,
    sqlite: bool = True,
    postgres: tuple[Backend, str] | None = None,
) -> Leak | None:
    """Find and scrub every secret's forms the attempt left; ``None`` if it left none.

    ``writable`` are the paths the attempt could write (its write rules); its logs in
    ``attempt_dir`` are checked too, with ``sqlite`` every cell of ``database``, and with
    ``postgres`` (the backend and the run's id) the run's rows in PostgreSQL.
    """
    needles = Needles(secrets)
    if not needles:
        return None
    leak = Leak()
    if sqlite and database.is_file() and not database.is_symlink():
        check_database(database, needles, leak)  # first: it names the step or workflow
    if postgres is not None:  # the run's rows in the shared system database
        check_postgres(*postgres, needles, leak)
    is_database = {database.name + s for s in ("", "-wal", "-shm", "-journal")}
    roots = [*writable, attempt_dir / "stdout.log", attempt_dir / "stderr.log"]
    seen: set[Path] = set()
    for path in (p for root in roots for p in _files(root)):
        if path in seen or (path.parent == database.parent and path.name in is_database):
            continue  # the database's own files: checked cell by cell above
        seen.add(path)
        rel = os.path.relpath(path, attempt_dir if path.is_relative_to(attempt_dir) else run_dir)
        if leak.add(_contains(path, needles), _file_label(needles.scrub_text(rel))):
            _rewrite(path, needles.scrub(read_file(path)))
        if path.name == "dbos_events.jsonl":
            _scrub_ledger(path, needles, leak)
    return leak if leak.places else None


# -- the environment ----------------------------------------------------------------------


def _vault_names(code_dir: Path) -> set[str]:
    """Names the relay's source passes to ``vault("NAME")`` as a string literal."""
    names: set[str] = set()
    for rel in code_files(code_dir):  # never its runs: a relay with many would slow every start
        path = code_dir / rel
        if path.suffix != ".py" or path.is_symlink() or path.stat().st_size > _MAX_SOURCE:
            continue
        try:
            source = read_file(path)
            if b"vault" not in source:
                continue
            tree = ast.parse(source)
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            arg = node.args[0]
            if called == "vault" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value)
    return names


def environment_secrets(
    code_dir: Path, environ: Mapping[str, str], vault_names: Iterable[str]
) -> dict[str, str]:
    """Environment values the relay may read through ``vault(NAME)``, by name.

    Those the relay's source names in ``vault("NAME")``, and any whose name looks secret (KEY,
    TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, or ending in _AUTH) with a value of at least
    8 characters. Names in the vault are left out: ``vault()`` reads the vault's value first.
    """
    in_vault = set(vault_names)
    named = _vault_names(code_dir) if code_dir.is_dir() else set()
    out: dict[str, str] = {}
    for name, value in environ.items():
        if name in in_vault:
            continue
        looks_secret = _SECRET_NAME.search(name) and len(value) >= MIN_ENVIRONMENT_LENGTH
        if (name in named and len(value) >= MIN_SECRET_LENGTH) or looks_secret:
            out[name] = value
    return out


def attempt_secrets(
    code_dir: Path, vault: Mapping[str, str], environ: Mapping[str, str]
) -> dict[str, str]:
    """Every value an attempt could read through ``vault()``: the vault's, then those of the
    environment it inherits (``environment_secrets``)."""
    return {**environment_secrets(code_dir, environ, vault), **vault}
