"""The REST API's tornado handlers: routes, JSON bodies, and RelayError → HTTP status mapping.

Every route requires the Jupyter server's own authentication (a token or a login) and asks
its authorizer (resource ``relays``). Operations run in a worker thread; failures come back
as ``{"error": {"code", "message"}}`` with a status chosen from the error class, never as a
traceback (an unexpected exception is logged by the server and reported as
``internal-error``).
"""

from __future__ import annotations

import asyncio
import errno
import json
from collections.abc import Callable
from http.client import responses
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from relay_notebook.commands.inputs import parse_json_text
from relay_notebook.commands.run_files import run_file, run_files
from relay_notebook.commands.runs import RunOutcome
from relay_notebook.errors import (
    AdmissionError,
    DiskFullError,
    IdempotencyKeyReusedError,
    InvalidRequestError,
    RelayError,
    RelayNotFoundError,
    ReleaseNotFoundError,
    RequestTooLargeError,
    RunFileNotFoundError,
    RunNotFoundError,
    codes,
)
from relay_notebook.errors.storage import storage_error
from relay_notebook.server.service import RelayService
from relay_notebook.server.workspaces import WorkspaceServices
from relay_notebook.views.wording import reword

__all__ = ["API_PREFIX", "MAX_BODY_BYTES", "ROUTES", "error_status"]

API_PREFIX = "relay/api"
#: the largest request body read; the rest of a longer one is discarded unread (HTTP 413)
MAX_BODY_BYTES = 4 * 1024 * 1024
#: codes of errors the HTTP layer itself reports
_HTTP_CODES = {403: codes.FORBIDDEN, 404: codes.ROUTE_NOT_FOUND, 405: codes.METHOD_NOT_ALLOWED}
_NOT_FOUND = (RelayNotFoundError, ReleaseNotFoundError, RunNotFoundError, RunFileNotFoundError)
_UNPROCESSABLE = (AdmissionError, IdempotencyKeyReusedError)
T = TypeVar("T")


def error_status(error: RelayError) -> int:
    """404 for a missing relay, release or run; 413 a body over the limit; 507 a full disk;
    400 other bad input; 422 or 409 refusals."""
    if isinstance(error, RequestTooLargeError):
        return 413
    if isinstance(error, DiskFullError):
        return 507
    if isinstance(error, _NOT_FOUND):
        return 404
    if error.exit_code == 2:
        return 400
    if isinstance(error, _UNPROCESSABLE):
        return 422
    return 409


def _answerable(exc: BaseException, home: Path) -> RelayError | None:
    """The coded answer to an unexpected ``exc`` that is no bug: a full disk, a read-only
    workspace, a file or folder name longer than the file system takes (HTTP 400)."""
    stored = storage_error(exc, home)
    if stored is not None:
        return stored
    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        return InvalidRequestError(
            "A file or folder name in the request is longer than the file system allows "
            "(at most 255 bytes a name, 4,096 a path); use a shorter one."
        )
    return None


@web.stream_request_body
class RelayAPIHandler(APIHandler):
    """Shared plumbing: the service, JSON replies and the error format.

    Bodies are streamed: at most ``MAX_BODY_BYTES`` are kept, so a huge request costs the
    server no more memory than a small one (the route then answers 413).
    """

    auth_resource = "relays"
    _received: bytearray
    _oversize: int

    async def prepare(self) -> None:  # type: ignore[override]
        self._received, self._oversize = bytearray(), 0
        await super().prepare()

    def data_received(self, chunk: bytes) -> None:
        if self._oversize or len(self._received) + len(chunk) > MAX_BODY_BYTES:
            self._oversize += len(chunk) + (len(self._received) if not self._oversize else 0)
            self._received.clear()
            return
        self._received += chunk

    @property
    def services(self) -> WorkspaceServices:
        services: WorkspaceServices = self.settings["relay_services"]
        return services

    @property
    def service(self) -> RelayService:
        """The service of the workspace the request names (``?workspace=``), else the
        server's own."""
        return self.services.get(self.get_query_argument("workspace", None))

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking service call off the event loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    def reply(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(data))

    def fail(self, status: int, code: str, message: str, **extra: Any) -> None:
        self.set_status(status)
        self.finish(json.dumps({"error": {"code": code, "message": message, **extra}}))

    def body(self) -> dict[str, Any]:
        """The request's JSON object; an empty body is ``{}``."""
        if self._oversize:
            raise RequestTooLargeError(
                f"The request body is {self._oversize:,} bytes; the REST API reads at most "
                f"{MAX_BODY_BYTES:,} (4 MiB), and a run input at most 1 MiB. Put large data in "
                f"a file the relay reads, and pass its path."
            )
        raw = bytes(self._received)
        if not raw.strip():
            return {}
        data = parse_json_text(
            raw, "The request body", error=InvalidRequestError, limit=MAX_BODY_BYTES
        )
        if not isinstance(data, dict):
            raise InvalidRequestError(
                f"The request body must be a JSON object, got {type(data).__name__}."
            )
        return data

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if exc is not None and not isinstance(exc, RelayError | web.HTTPError):
            exc = _answerable(exc, self.services.default.workspace.home) or exc
        if isinstance(exc, RelayError):
            extra: dict[str, Any] = {}
            if isinstance(exc, AdmissionError):
                extra["diagnostics"] = [d.to_dict() for d in exc.diagnostics]
            self.fail(error_status(exc), exc.code, reword(exc.message, "api"), **extra)
            return
        if isinstance(exc, web.HTTPError):
            self._fail_http(exc.status_code, exc.log_message)
            return
        if exc is None:
            self._fail_http(status_code, None)
            return
        self.fail(
            500,
            codes.INTERNAL_ERROR.code,
            f"The relay API failed unexpectedly ({type(exc).__name__}); this is a bug in "
            f"relay_notebook. The Jupyter server log has the traceback.",
        )

    def _fail_http(self, status: int, detail: str | None) -> None:
        message = detail or responses.get(status, "HTTP error")
        if status == 403:
            message = (
                f"{message}: the Jupyter server requires its token. Send the header "
                f"'Authorization: token TOKEN' (jupyter server list shows the token)."
            )
        self.fail(status, _HTTP_CODES.get(status, codes.HTTP_ERROR).code, message)

    def log_exception(
        self,
        typ: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # a RelayError is an answer to the client, not a server failure: one line, no traceback
        if value is not None and not isinstance(value, RelayError | web.HTTPError):
            value = _answerable(value, self.services.default.workspace.home) or value
        if isinstance(value, RelayError):
            self.log.info("%s: %s [%s]", self._request_summary(), value.message, value.code)
            return
        super().log_exception(typ, value, tb)


class WorkspaceHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        requested = self.get_query_argument("workspace", None)
        self.reply(await self.call(self.services.describe, requested))


class RelaysHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.reply([r.to_dict() for r in await self.call(self.service.list_relays)])


class RelayHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        self.reply(await self.call(self.service.relay, name))

    @web.authenticated
    @authorized
    async def delete(self, name: str) -> None:
        force = self.get_query_argument("force", "false")
        if force not in ("true", "false"):
            raise InvalidRequestError(
                f"Query parameter force must be true or false, got {force[:20]!r}."
            )
        deleted = await self.call(self.service.delete_relay, name, force=force == "true")
        self.reply(deleted.to_dict())


class ReleasesHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        self.reply([r.to_dict() for r in await self.call(self.service.releases, name)])

    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        self.body()  # publish takes no fields, but a malformed body is still an error
        published = await self.call(self.service.publish, name)
        self.reply(published.to_dict(), 201 if published.created else 200)


class AccessHandler(RelayAPIHandler):
    def initialize(self, granted: bool) -> None:
        self.granted = granted

    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        self.reply(await self.call(self.service.set_access, name, granted=self.granted))


class RelayRunsHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        key = self.request.headers.get("Idempotency-Key")
        run, started = await self.call(self.service.start_run, name, self.body(), key)
        self.set_header("Location", self.base_url + f"{API_PREFIX}/runs/{run['run_id']}")
        self.reply(run, 202 if started else 200)


class RunsHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        relay = self.get_query_argument("relay", None)
        self.reply([s.to_dict() for s in await self.call(self.service.list_runs, relay or None)])


class RunHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        self.reply(await self.call(self.service.run, run_id))

    @web.authenticated
    @authorized
    async def delete(self, run_id: str) -> None:
        self.reply((await self.call(self.service.delete_run, run_id)).to_dict())


class RecoverHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, run_id: str) -> None:
        self.body()
        run = await self.call(self.service.recover, run_id)
        # an outcome: no attempt started; a brief: the next attempt goes
        if isinstance(run, RunOutcome):
            self.reply(run.to_dict(), 200)
        else:
            self.reply(run, 202)


class ForkHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, run_id: str) -> None:
        run = await self.call(self.service.fork, run_id, self.body())
        self.set_header("Location", self.base_url + f"{API_PREFIX}/runs/{run['run_id']}")
        self.reply(run, 202)


class MessagesHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, run_id: str) -> None:
        key = self.request.headers.get("Idempotency-Key")
        delivery = await self.call(self.service.send_message, run_id, self.body(), key)
        self.reply(delivery.to_dict(), 202 if delivery.handle is not None else 200)


class LineageHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        self.reply((await self.call(self.service.lineage, run_id)).to_dict())


class RunEventsHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        self.reply((await self.call(self.service.events, run_id)).to_dict())


class ReconcileHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def post(self, run_id: str) -> None:
        self.reply(await self.call(self.service.reconcile, run_id, self.body()))


class RunFilesHandler(RelayAPIHandler):
    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        files = await self.call(run_files, self.service.workspace, run_id)
        self.reply(files.to_dict())


class RunFileHandler(RelayAPIHandler):
    """One file of the run's ``execution/``; the path is checked by ``resolve_run_file``."""

    @web.authenticated
    @authorized
    async def get(self, run_id: str, path: str) -> None:
        preview = await self.call(run_file, self.service.workspace, run_id, path)
        self.reply(preview.to_dict())


class NoRouteHandler(RelayAPIHandler):
    """Anything else under ``relay/api``: a JSON 404 instead of the server's HTML page."""

    async def prepare(self) -> None:  # type: ignore[override]
        await super().prepare()
        if not self.current_user:
            raise web.HTTPError(403)
        raise web.HTTPError(404, f"No relay API route {self.request.method} {self.request.path}")


_NAME = r"(?P<name>[^/]+)"
_RUN = r"(?P<run_id>[^/]+)"
#: (pattern relative to the server's base_url, handler, kwargs), matched in order
ROUTES: list[tuple[str, type[RelayAPIHandler], dict[str, Any]]] = [
    (rf"{API_PREFIX}/workspace", WorkspaceHandler, {}),
    (rf"{API_PREFIX}/relays", RelaysHandler, {}),
    (rf"{API_PREFIX}/relays/{_NAME}", RelayHandler, {}),
    (rf"{API_PREFIX}/relays/{_NAME}/releases", ReleasesHandler, {}),
    (rf"{API_PREFIX}/relays/{_NAME}/runs", RelayRunsHandler, {}),
    (rf"{API_PREFIX}/relays/{_NAME}/grant", AccessHandler, {"granted": True}),
    (rf"{API_PREFIX}/relays/{_NAME}/revoke", AccessHandler, {"granted": False}),
    (rf"{API_PREFIX}/runs", RunsHandler, {}),
    (rf"{API_PREFIX}/runs/{_RUN}", RunHandler, {}),
    (rf"{API_PREFIX}/runs/{_RUN}/recover", RecoverHandler, {}),
    (rf"{API_PREFIX}/runs/{_RUN}/reconcile", ReconcileHandler, {}),
    (rf"{API_PREFIX}/runs/{_RUN}/fork", ForkHandler, {}),
    (rf"{API_PREFIX}/runs/{_RUN}/lineage", LineageHandler, {}),
    (rf"{API_PREFIX}/runs/{_RUN}/events", RunEventsHandler, {}),
    (rf"{API_PREFIX}/runs/{_RUN}/messages", MessagesHandler, {}),
    (rf"{API_PREFIX}/runs/{_RUN}/files", RunFilesHandler, {}),
    (rf"{API_PREFIX}/runs/{_RUN}/files/(?P<path>.+)", RunFileHandler, {}),
    (rf"{API_PREFIX}(?:/.*)?", NoRouteHandler, {}),
]
