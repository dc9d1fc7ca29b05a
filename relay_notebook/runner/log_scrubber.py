"""The log scrubber: an attempt's stdout and stderr reach their files with vault values replaced.

Design note: the child replaces ``sys.stdout`` and ``sys.stderr`` with scrubbing streams, but
writes to file descriptors 1 and 2 bypass them (``os.write``, C extensions, a logging handler
holding the original stream, the interpreter's last words before a crash). When a run has
secrets, the supervisor therefore hands the child pipes instead of its log files, and a small
process of the supervisor's own copies each pipe to its file with every secret replaced. It
gets the secrets through its stdin, never a file or its command line; it holds back the end of
what it has read while that end could be the start of a secret, so a value split across writes
is still found; it runs in its own session, so it outlives a kill of the child's process group
(and of the supervisor) and drains the pipes to their end: a crashed child's stderr tail is
kept, scrubbed. Run as ``python -m relay_notebook.runner.log_scrubber OUT_FD ERR_FD OUT ERR``.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from agentworks.redact import Redactor
from relay_notebook.runner.backend import ENV_VAR

__all__ = ["AttemptLogs", "StreamScrubber"]

_CHUNK = 64 * 1024


class StreamScrubber:
    """Scrubs a byte stream fed in pieces: ``feed`` returns what is safe to write now."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._prefixes = redactor.encoded_values
        self._pending = b""

    def _held(self, data: bytes) -> int:
        """How many bytes at the end of ``data`` could begin a secret (kept for the next read)."""
        held = 0
        for secret in self._prefixes:
            for k in range(min(len(secret) - 1, len(data)), held, -1):
                if data.endswith(secret[:k]):
                    held = k
                    break
        return held

    def feed(self, chunk: bytes) -> bytes:
        data = self.redactor.scrub_bytes(self._pending + chunk)
        held = self._held(data)
        self._pending = data[len(data) - held :] if held else b""
        return data[: len(data) - held]

    def close(self) -> bytes:
        """The rest, at the end of the stream (a held-back start of a secret is not one)."""
        rest, self._pending = self._pending, b""
        return rest


def _copy(sources: dict[int, Path], redactor: Redactor) -> None:
    """Copy each pipe to its file through a ``StreamScrubber`` until every pipe has ended."""
    selector = selectors.DefaultSelector()
    open_files: dict[int, tuple[int, StreamScrubber]] = {}
    for fd, path in sources.items():
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        open_files[fd] = (out, StreamScrubber(redactor))
        selector.register(fd, selectors.EVENT_READ)
    while open_files:
        for key, _ in selector.select():
            fd = int(key.fd)
            out, scrubber = open_files[fd]
            chunk = os.read(fd, _CHUNK)
            data = scrubber.feed(chunk) if chunk else scrubber.close()
            if data:
                os.write(out, data)
            if not chunk:
                selector.unregister(fd)
                os.close(fd)
                os.close(out)
                del open_files[fd]


class AttemptLogs:
    """Where a child's stdout and stderr go: the log files, or pipes to a scrubber process."""

    def __init__(self, attempt_dir: Path, secrets: dict[str, str] | None) -> None:
        #: the values scrubbed, which the supervisor's secret check looks for too
        self.secrets: dict[str, str] = dict(secrets or {})
        self.stdout_path = attempt_dir / "stdout.log"
        self.stderr_path = attempt_dir / "stderr.log"
        self._scrubber: subprocess.Popen[bytes] | None = None
        self._files: list[IO[bytes]] = []
        self.stdout: Any
        self.stderr: Any
        if not Redactor(secrets or {}):
            # closed by started(), once the child holds its own copies
            self._files = [open(path, "wb") for path in (self.stdout_path, self.stderr_path)]  # noqa: SIM115
            self.stdout, self.stderr = self._files
            return
        out_r, self.stdout = os.pipe()
        err_r, self.stderr = os.pipe()
        try:
            self._scrubber = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    __name__,
                    str(out_r),
                    str(err_r),
                    str(self.stdout_path),
                    str(self.stderr_path),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(out_r, err_r),
                start_new_session=True,
                env={k: v for k, v in os.environ.items() if k != ENV_VAR},
            )
            assert self._scrubber.stdin is not None
            self._scrubber.stdin.write(json.dumps(secrets).encode())
            self._scrubber.stdin.close()
        except BaseException:
            self.started()
            raise
        finally:
            os.close(out_r)
            os.close(err_r)

    def started(self) -> None:
        """Close our ends once the child has its own (the scrubber then sees the child's end)."""
        for f in self._files:
            f.close()
        if self._scrubber is not None:
            for fd in (self.stdout, self.stderr):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def wait(self, timeout: float = 10.0) -> None:
        """Wait until the logs are complete (a grandchild holding a pipe open is not waited for)."""
        if self._scrubber is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._scrubber.wait(timeout)


def main(argv: list[str]) -> None:
    out_fd, err_fd, out_path, err_path = argv
    secrets = json.loads(sys.stdin.read() or "{}")
    _copy({int(out_fd): Path(out_path), int(err_fd): Path(err_path)}, Redactor(secrets))


if __name__ == "__main__":
    main(sys.argv[1:])
