"""The tools on runs: list, run (with a crash point), recover, wait, reconcile, fork, diff,
lineage, logs, events, send (an approval), and the run's files (listed, and read capped).

Each takes the REST API's request fields and checks them with the same functions
(``commands.api_requests``); a tool that starts an attempt waits for it up to ``wait_s``
seconds and returns its outcome, or the run as it is then (``wait`` follows it further).
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp_types import ToolAnnotations
from pydantic import Field

from relay_notebook import commands
from relay_notebook.commands import api_requests, run_events, run_files, time_travel, waiting
from relay_notebook.mcp_server.app import RelayMCPServer, Supervision
from relay_notebook.mcp_server.outputs import (
    DiffResult,
    Document,
    FilePreview,
    LineageResult,
    LogResult,
    ReconcileResult,
    RunResult,
    RunsResult,
)
from relay_notebook.mcp_server.relay_tools import READ_ONLY, STARTS, RelayName, RunId

__all__ = ["register_run_tools"]

#: waiting on a run (which it may resume when due): repeating it is harmless
_FOLLOWS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
#: settling an uncertain call: what was open is decided for good
_SETTLES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)

WaitSeconds = Annotated[
    float,
    Field(
        ge=0, le=600,
        description="seconds to wait for the attempt to end (0: return at once); a run that "
        "waits for a message or a timer ends its attempt 'waiting' after a few seconds",
    ),
]  # fmt: skip
JsonValue = Annotated[Any, Field(description="any JSON value (at most 1 MiB, 100 deep)")]
#: an idempotency key: the REST API's Idempotency-Key rule (1–255 printable ASCII)
IdempotencyKey = Annotated[
    str | None,
    Field(
        min_length=1, max_length=255, pattern=r"^[ -~]+$",
        description="deliver at most once per key (a retried send is not delivered twice)",
    ),
]  # fmt: skip


def register_run_tools(server: RelayMCPServer, served: Supervision) -> None:
    """Add the run tools to ``server``; they act on ``served.workspace``."""
    ws = served.workspace

    def body(**fields: Any) -> dict[str, Any]:
        """A REST request body of the fields given (``None``: not given)."""
        return {k: v for k, v in fields.items() if v is not None}

    @server.command_tool(READ_ONLY)
    def list_runs(
        relay: Annotated[str | None, Field(description="only this relay's runs")] = None,
    ) -> RunsResult:
        """The workspace's runs, oldest first: status, attempts, checkpoints reused,
        release (relay runs --json)."""
        if relay is not None:
            ws.load_draft(relay)
        found = [s.to_dict() for s in commands.runs(ws, relay)]
        return RunsResult(runs=served.clean(found))

    @server.command_tool(STARTS)
    def run(
        relay: RelayName,
        input: JsonValue = None,
        release: Annotated[
            str | None, Field(description="run a release (vN, hash prefix, latest), not the draft")
        ] = None,
        crash: Annotated[
            str | None,
            Field(
                description="crash on purpose: after:STEP[#N] (after its checkpoint) or "
                "during:STEP[#N]; the run ends interrupted, ready to recover"
            ),
        ] = None,
        wait_s: WaitSeconds = 120,
    ) -> RunResult:
        """Run the relay in a supervised child process (relay run NAME): admission first;
        returns the outcome (status, result or error) when the attempt ends."""
        request = api_requests.run_request(body(input=input, release=release, crash=crash))
        ws.load_draft(relay)
        handle = commands.run(
            ws, relay, run_input=request.run_input, release=request.release, crash=request.crash
        )
        return RunResult.model_validate(served.settle(handle, wait_s))

    @server.command_tool(STARTS)
    def recover(run_id: RunId, wait_s: WaitSeconds = 120) -> RunResult:
        """The next attempt of an interrupted run (relay recover RUN): completed steps come
        back from their checkpoints. A finished run, or one that needs reconciling, comes
        back as it is."""
        handle = commands.recover(ws, run_id)
        if handle.outcome is not None:
            return RunResult.model_validate(served.clean(handle.outcome.to_dict()))
        return RunResult.model_validate(served.settle(handle, wait_s))

    @server.command_tool(_FOLLOWS)
    def wait(run_id: RunId, wait_s: WaitSeconds = 120) -> RunResult:
        """Block until the run finishes or stops, through its waits, resuming it when its
        timer is due (relay wait RUN); after wait_s, the run as it is then."""
        try:
            outcome = waiting.wait_for_run(ws, run_id, timeout=wait_s)
        except TimeoutError as exc:
            brief = commands.run_brief(ws, run_id)
            brief["note"] = str(exc)
            return RunResult.model_validate(served.clean(brief))
        return RunResult.model_validate(served.clean(outcome.to_dict()))

    @server.command_tool(_SETTLES)
    def reconcile(
        run_id: RunId,
        result: Annotated[
            Any, Field(description="the call took effect, with this result (JSON)")
        ] = None,
        retry: Annotated[
            bool, Field(description="the call did not take effect: run it again")
        ] = False,
        key: Annotated[str | None, Field(description="which uncertain call, when several")] = None,
    ) -> ReconcileResult:
        """Resolve an uncertain call so recovery can go on (relay reconcile RUN --result JSON
        | --retry); with neither, list the run's uncertain calls."""
        if result is None and not retry:
            pending = commands.pending_calls(ws, run_id)
            rows = [{"key": p.key, "call": p.call, "attempt": p.attempt} for p in pending]
            return ReconcileResult(run_id=run_id, pending=served.clean(rows))
        request = api_requests.reconcile_request(body(result=result, retry=retry or None, key=key))
        state = commands.reconcile(
            ws, run_id, result=request.result, retry=request.retry, key=request.key
        )
        done = {"run_id": run_id, "key": state.key, "state": state.state, "result": state.result}
        return ReconcileResult.model_validate(served.clean(done))

    @server.command_tool(STARTS)
    def fork(
        run_id: RunId,
        from_call: Annotated[
            str, Field(description="the first call that runs fresh, STEP[#N], e.g. price#2")
        ],
        input: Annotated[Any, Field(description="the fork's input (default: the run's)")] = None,
        set: Annotated[
            dict[str, Any] | None,
            Field(description='replace copied calls\' outputs, e.g. {"price#1": 8}'),
        ] = None,
        release: Annotated[str | None, Field(description="run a release's code")] = None,
        draft: Annotated[bool, Field(description="run the current draft (after a fix)")] = False,
        crash: Annotated[str | None, Field(description="crash the fork on purpose")] = None,
        wait_s: WaitSeconds = 120,
    ) -> RunResult:
        """A new run from one of RUN's calls: earlier calls copied (with set's outputs), the
        rest run fresh on the run's code, a release or the draft (relay fork RUN --from
        STEP#N)."""
        request = api_requests.fork_request(
            body(input=input, set=set, release=release) | {"from": from_call, "draft": draft}
        )
        handle = time_travel.fork(ws, run_id, request, crash=crash)
        return RunResult.model_validate(served.settle(handle, wait_s))

    @server.command_tool(READ_ONLY)
    def diff(run_a: RunId, run_b: RunId) -> DiffResult:
        """Two runs compared call by call: status, input, output and error, and what differs
        (relay diff RUN_A RUN_B --json)."""
        return DiffResult(calls=served.clean(time_travel.diff(ws, run_a, run_b)))

    @server.command_tool(READ_ONLY)
    def lineage(run_id: RunId) -> LineageResult:
        """The fork tree the run belongs to, from the run first forked from: each run's
        status, fork origin and edits, its forks (relay lineage RUN --json)."""
        tree = time_travel.lineage(ws, run_id).to_dict()
        return LineageResult.model_validate(served.clean(tree))

    @server.command_tool(READ_ONLY)
    def logs(run_id: RunId) -> LogResult:
        """The run's typed log: status, attempts, every step call (executed or reused,
        retries, errors), what a recovery would do, agent call files (relay logs RUN
        --json)."""
        doc = api_requests.log_document(ws, run_id)
        return LogResult.model_validate(served.clean(doc))

    @server.command_tool(READ_ONLY)
    def events(run_id: RunId) -> Document:
        """What the run published, as it is now: each DBOS event's latest value, every
        set_event call, stream values, messages sent to it (relay events RUN --json)."""
        found = run_events.read_run_events(ws, run_id).to_dict()
        return Document.model_validate(served.clean(found))

    @server.command_tool(STARTS)
    def send(
        run_id: RunId,
        topic: Annotated[str, Field(description="the topic the run waits on (DBOS.recv)")],
        message: JsonValue,
        idempotency_key: IdempotencyKey = None,
        wait_s: WaitSeconds = 120,
    ) -> Document:
        """Send a message (e.g. an approval) to a run; a run waiting for it resumes
        (relay send RUN TOPIC JSON). Returns the delivery and, when it resumed, the
        outcome."""
        topic, message = api_requests.message_request({"topic": topic, "message": message})
        delivery = waiting.send(ws, run_id, topic, message, idempotency_key=idempotency_key)
        out: dict[str, Any] = {"delivery": served.clean(delivery.to_dict())}
        if delivery.handle is not None:
            out["outcome"] = served.settle(delivery.handle, wait_s)
        return Document.model_validate(out)

    @server.command_tool(READ_ONLY)
    def list_files(
        run_id: RunId,
        call: Annotated[str | None, Field(description="only this call folder, e.g. call-2")] = None,
    ) -> Document:
        """The run's execution/ folder: each agent call's folder, labelled, and its files
        (relay files RUN [CALL] --json)."""
        doc = run_files.files_document(run_files.run_files(ws, run_id), call)
        return Document.model_validate(served.clean(doc))

    @server.command_tool(READ_ONLY)
    def read_file(
        run_id: RunId,
        path: Annotated[
            str, Field(min_length=1, max_length=4096, description="a path list_files gave")
        ],
    ) -> FilePreview:
        """One file of the run's execution/ folder: text at most 64 KiB (truncated says so),
        an image as base64, vault values scrubbed; never a file outside that folder."""
        preview = run_files.run_file(ws, run_id, path).to_dict()
        return FilePreview.model_validate(served.clean(preview))
