"""Idempotency keys of the REST API: which run a repeated ``POST .../runs`` delivery belongs to.

Design note: a client that retries a request after a lost response must not start a second
run. The key → run mapping lives in the workspace (``.relay_api/idempotency.json``), written
atomically under an exclusive file lock that is held while the run is started, so two
deliveries racing each other (threads of one server, or two servers on one workspace) start
one run between them, and a server restart forgets nothing. A key is scoped to one relay and
bound to a fingerprint of the request body: reusing it for a different request is an error
rather than a silent replay of the wrong run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypedDict

from relay_notebook.commands.api_requests import RunRequest
from relay_notebook.errors import IdempotencyKeyReusedError, InvalidRequestError
from relay_notebook.workspace.file_io import write_json_atomic

__all__ = [
    "API_DIR",
    "IdempotencyFile",
    "IdempotencyStore",
    "KeyRecord",
    "fingerprint",
    "validate_key",
]

#: the API's own folder inside the workspace (a dot folder: never a relay)
API_DIR = ".relay_api"
MAX_KEY_LENGTH = 255


def validate_key(key: str) -> str:
    """An ``Idempotency-Key`` header value: 1–255 printable ASCII characters."""
    if not key or len(key) > MAX_KEY_LENGTH or not all(" " <= c <= "~" for c in key):
        raise InvalidRequestError(
            f"Invalid Idempotency-Key header: expected 1 to {MAX_KEY_LENGTH} printable ASCII "
            f"characters (a UUID is a good choice), got {len(key)} characters."
        )
    return key


def fingerprint(request: RunRequest) -> str:
    """A digest of a run request's fields, whatever the body's key order and whitespace: no
    input and a null one are one request (both start the run with the empty object INPUT
    gets)."""
    run_input = {} if request.run_input is None else request.run_input
    fields = {"crash": request.crash, "input": run_input, "release": request.release}
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class KeyRecord(TypedDict):
    """One key of ``idempotency.json``: the run it started, the fingerprint of the request
    that started it, and when (epoch seconds)."""

    run_id: str
    fingerprint: str
    created_at: float


class IdempotencyFile(TypedDict):
    """``idempotency.json``: each relay's keys."""

    version: int
    relays: dict[str, dict[str, KeyRecord]]


class IdempotencyStore:
    """The persisted key → run mapping of one workspace."""

    def __init__(self, home: Path) -> None:
        self.folder = home / API_DIR
        self.file = self.folder / "idempotency.json"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[IdempotencyFile]:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / "idempotency.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield self._read()
        finally:
            os.close(fd)

    def _read(self) -> IdempotencyFile:
        try:
            data: IdempotencyFile = json.loads(self.file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return IdempotencyFile(version=1, relays={})
        return data

    def run_once(
        self,
        relay: str,
        key: str,
        digest: str,
        start: Callable[[], str],
        exists: Callable[[str], bool],
    ) -> tuple[str, bool]:
        """The run for ``key``: ``(run_id, False)`` if known, else ``start()`` and ``True``.

        ``start`` runs under the lock and returns the new run id; if it raises, nothing is
        recorded and the key stays free. A mapping whose run folder is gone (``exists`` says
        so) is forgotten.
        """
        with self._locked() as data:
            keys = data["relays"].setdefault(relay, {})
            found = keys.get(key)
            if found is not None and exists(str(found["run_id"])):
                if found["fingerprint"] != digest:
                    raise IdempotencyKeyReusedError(
                        f"Idempotency-Key {key!r} already started run {found['run_id']} of "
                        f"relay {relay} with a different request body. Send the same body to "
                        f"get that run back, or use a new key to start another run."
                    )
                return str(found["run_id"]), False
            run_id = start()
            keys[key] = KeyRecord(run_id=run_id, fingerprint=digest, created_at=time.time())
            write_json_atomic(self.file, data)
            return run_id, True
