"""The registry of stable codes: every code the kit raises, records or reports, defined once.

Each entry says what the code means, what the user types next, and how it is emitted (raised
as an exception's ``code``, recorded as ``{"code", "message"}`` in run.json, outcome.json,
the ledger, the recovery preview or a REST body, or reported as a source diagnostic).
``RelayError`` subclasses name their entry; records are built with ``Code.record``; the
source layer's ``CODES`` tables are read from here; ``docs/errors.md`` is generated from
``REGISTRY`` by ``tools/make_error_docs.py``. A test refuses literal codes anywhere else.
"""

from __future__ import annotations

from agentworks.codes import (
    AGENTWORKS_CODES,
    MCP_SERVERS_INVALID,
    NEEDS_RECONCILIATION,
    Code,
    Section,
)
from relay_notebook.errors.check_codes import (
    ADMISSION,
    ANNOTATIONS,
    LINT,
    MCP_SECRET_UNSET,
    MISSING_AWAIT,
    SYNTAX_ERROR,
)

__all__ = [
    "MCP_SECRET_UNSET",
    "MCP_SERVERS_INVALID",
    "MISSING_AWAIT",
    "NEEDS_RECONCILIATION",
    "REGISTRY",
    "SYNTAX_ERROR",
    "Code",
    "Section",
    "meanings",
]


def _error(code: str, meaning: str, hint: str, *, exit: int = 1, recorded: bool = False) -> Code:
    sections: tuple[Section, ...] = ("errors", "runs") if recorded else ("errors",)
    return Code(code, meaning, hint, sections, raised=True, recorded=recorded, exit=exit)


def _refusal(code: str, meaning: str, hint: str, *, recorded: bool = False) -> Code:
    sections: tuple[Section, ...] = ("errors", "recovery")
    if recorded:
        sections = ("errors", "runs", "recovery")
    return Code(code, meaning, hint, sections, raised=True, recorded=True)


def _run(code: str, meaning: str, hint: str) -> Code:
    return Code(code, meaning, hint, ("runs",), recorded=True)


_RECOVER = "`relay recover RUN`"
_NEW_RUN = "start a new run: `relay run NAME`"

# -- raised by commands (the RelayError tree, the CLI's own) ---------------------------------
RELAY_ERROR = _error(
    "relay-error", "Base of every error the kit raises on purpose; `code` is stable.", ""
)
ACCESS_REVOKED = _refusal(
    "access-revoked",
    "The relay's access is revoked: no attempt starts until `relay grant NAME`.",
    "`relay grant NAME`, then `relay recover RUN`",
    recorded=True,
)
ADMISSION_FAILED = _error(
    "admission-failed",
    "The relay's source failed admission; `diagnostics` holds every problem found.",
    "fix the lines listed, then `relay check NAME`",
)
ATTEMPT_BUDGET_EXHAUSTED = _refusal(
    "attempt-budget-exhausted",
    "Recovery refused: the run has used all of its process attempts.",
    "fork it to keep its completed steps: `relay fork RUN --from CALL`; or " + _NEW_RUN,
)
BINDING_CHANGED = _error(
    "binding-changed",
    "Recovery refused: something the run was bound to at its first attempt has changed.",
    "restore what changed (or recover with the original release), or " + _NEW_RUN,
)
CHECKPOINTS_LOST = _refusal(
    "checkpoints-lost",
    "Recovery refused: checkpoints the run's ledger records are missing from its database.",
    "restore the run's database, or `relay recover RUN --accept-lost-checkpoints` "
    "(the lost steps run again)",
)
OUTSIDE_WORKFLOW = _refusal(
    "outside-workflow",
    "Attempt refused: the run's DBOS database holds a workflow the kit did not make (a fork "
    "made with `dbos workflow fork`, DBOS's own tool); DBOS would run it inside the attempt.",
    "cancel it: `dbos workflow cancel WORKFLOW -s URL`, then " + _RECOVER + "; fork with the "
    "kit instead: `relay fork RUN --from CALL`",
)
DATABASE_ERROR = _error(
    "database-error",
    "The run's DBOS database refused a statement (damaged, full or unwritable); the SQL is "
    "never shown.",
    "free space or restore the run's database from a copy, then " + _RECOVER + "; if the run "
    "failed, " + _NEW_RUN,
    recorded=True,
)
DISK_FULL = _error(
    "disk-full",
    "The disk holding the workspace is full (or its quota is spent): nothing more could be "
    "written there. A run it stopped is `interrupted`, its checkpoints kept.",
    f"free space in the folder named, then run the command again (a stopped run: {_RECOVER})",
    recorded=True,
)
DATABASE_OWNED = _error(
    "database-owned-by-other-workspace",
    "The PostgreSQL database already holds the runs of another workspace.",
    "give this workspace a database of its own (change the name in `RELAY_DATABASE_URL`)",
)
DATABASE_OUT_OF_REACH = _error(
    "database-out-of-reach",
    "The relay declares `network: none` and its runs' PostgreSQL server is not on this "
    "machine's loopback: its sandbox could not reach the run's own state. Nothing was started.",
    "remove `network: none` from the relay's `relay.yaml` (it then reaches the outside, where "
    "the server is), or keep its runs on a PostgreSQL server on this machine",
    recorded=True,
)
DATABASE_UNAVAILABLE = _error(
    "database-unavailable",
    "The PostgreSQL system database cannot be reached (the password is never shown).",
    "start the server, or fix `RELAY_DATABASE_URL`",
)
DEADLINE_PASSED = _refusal(
    "deadline-passed", "Recovery refused: the run's first deadline has passed.", _NEW_RUN
)
FORK_REFUSED = _error(
    "fork-refused",
    "A fork cannot be made as asked (the call is not in the parent, a database it needs).",
    "name a call the parent recorded (`relay logs RUN`), e.g. `relay fork RUN --from STEP#1`",
    recorded=True,
)
FORK_INCOMPLETE = _error(
    "fork-incomplete",
    "Recovery refused: the making of this fork was cut short and cannot be completed from "
    "its parent (the parent is gone or changed); the fork never ran.",
    "delete it: `relay delete RUN`, then fork again: `relay fork PARENT --from STEP`",
)
IDEMPOTENCY_KEY_REUSED = _error(
    "idempotency-key-reused",
    "An `Idempotency-Key` already used to start a run of this relay with a different body.",
    "send the same body to get that run back, or use a new key",
)
INVALID_CRASH_SPEC = _error(
    "invalid-crash-spec",
    "A --crash value that is not `after:STEP[#N]` or `during:STEP[#N]`.",
    "e.g. `--crash after:extract_invoice` or `--crash during:charge#2`",
    exit=2,
)
INVALID_DATABASE_URL = _error(
    "invalid-database-url",
    "`RELAY_DATABASE_URL` / `--database-url` is not a `postgresql://` URL.",
    "`postgresql://USER@HOST:PORT/DBNAME`, or unset `RELAY_DATABASE_URL` for SQLite",
    exit=2,
)
INVALID_INPUT = _error(
    "invalid-input",
    "The run input is not strict JSON (at most 1 MiB, nested 100 deep) or cannot be read.",
    '`--input \'{"key": "value"}\'` or `--input-file FILE`',
    exit=2,
)
INVALID_MANIFEST = _error(
    "invalid-manifest",
    "`relay.yaml` is not valid YAML or does not match the manifest schema.",
    "fix `relay.yaml` as the message says, then `relay check NAME`",
    exit=2,
)
INVALID_RELAY_NAME = _error(
    "invalid-relay-name",
    "A relay name that cannot name a folder safely.",
    "a letter, then letters, digits, `_` or `-` (at most 64), e.g. `invoice`",
    exit=2,
)
INVALID_REQUEST = _error(
    "invalid-request",
    "A REST API request whose body, query or headers are not what the route expects.",
    "see `openapi.yaml` for the route",
    exit=2,
)
INVALID_RUN_ID = _error(
    "invalid-run-id",
    "A RUN argument that is not of the form RELAY-N.",
    "`relay runs` lists run ids, e.g. `invoice-3`",
    exit=2,
)
INVALID_SECRET = _error(
    "invalid-secret",
    "A vault secret name or value that cannot be stored (the value is never shown).",
    "a name like `OPENAI_API_KEY`: `relay vault set NAME`",
    exit=2,
)
INVALID_SOURCE = _error(
    "invalid-source",
    "A relay file that cannot be read as Python source (not UTF-8 or its declared encoding).",
    "save it as UTF-8, or declare its encoding on the first line",
    exit=2,
)
INVALID_TARGET = _error(
    "invalid-target",
    "A TARGET that is neither a relay name nor a readable `.py` file.",
    "`relay relays` lists relay names; or give a path to a `.py` file",
    exit=2,
)
LEDGER_CORRUPT = _error(
    "ledger-corrupt",
    "A run's event ledger has a gap in its sequence numbers or another run's events.",
    "restore the run folder from a copy, or " + _NEW_RUN,
)
NOT_DURABLE = _refusal(
    "not-durable",
    "Recovery refused: the run's relay has `relay_durability: none` (nothing to resume).",
    _NEW_RUN,
)
NOTHING_TO_RECONCILE = _error(
    "nothing-to-reconcile",
    "`reconcile` found no matching uncertain call (or needs `--key` to choose one).",
    "`relay recover RUN`, or pick a call with `--key KEY`",
    exit=2,
)
QUEUE_NEEDS_POSTGRESQL = _error(
    "queue-needs-postgresql",
    "`--queue` and workers need a PostgreSQL database (`RELAY_DATABASE_URL`).",
    "set `RELAY_DATABASE_URL=postgresql://USER@HOST:PORT/DBNAME` or pass `--database-url`",
    exit=2,
)
RELAY_HAS_RUNS = _error(
    "relay-has-runs",
    "`relay delete NAME` refused: the relay has runs (delete them, or pass `--force`).",
    "`relay delete RUN` for each run, or `relay delete NAME --force`",
)
RELAY_NOT_FOUND = _error(
    "relay-not-found",
    "No draft of that name in the workspace.",
    "a `%%relay NAME` cell or `relay check path/to/NAME.py`",
    exit=2,
)
RELEASE_NOT_FOUND = _error(
    "release-not-found",
    "No release of the relay matches the given reference.",
    "`relay releases NAME`, or `relay publish NAME` for a first one",
    exit=2,
)
RELEASE_TAMPERED = _error(
    "release-tampered",
    "A frozen release file no longer matches its recorded checksum.",
    "`relay verify NAME`, then `relay publish NAME`",
    recorded=True,
)
REQUEST_TOO_LARGE = _error(
    "request-too-large",
    "A REST API request body over the 4 MiB limit (HTTP 413).",
    "put large data in a file the relay reads, and pass its path",
    exit=2,
)
RUN_FILE_NOT_FOUND = _error(
    "run-file-not-found",
    "No such file in the run's `execution/` folder (`relay files RUN` lists them).",
    "`relay files RUN`",
    exit=2,
)
RUN_FILE_REFUSED = _error(
    "run-file-refused",
    "A file path outside the run's `execution/` folder (`..`, absolute, a symlink out).",
    "a path relative to `execution/`, as `relay files RUN` lists it",
    exit=2,
)
CLEAN_RUN_FAILED = _error(
    "clean-run-failed",
    "`relay test --crash-each`: the uncrashed run did not succeed, so there is nothing to "
    "compare crashed runs with.",
    "fix the relay (`relay logs RUN` shows why the clean run stopped), then test again",
)
WORKSPACE_REFUSED = _error(
    "workspace-refused",
    "A REST request named a workspace the server does not serve (outside its root folder).",
    "start JupyterLab on it: `jupyter lab --RelayExtension.home=PATH`",
    exit=2,
)
WORKSPACE_NOT_FOUND = _error(
    "workspace-not-found",
    "A REST request named a workspace folder that does not exist (no relay saved there yet).",
    "save a relay there first (`%%relay NAME` in a notebook that uses it)",
    exit=2,
)
# one meaning for the raised and the recorded code (the run-error table said "Another
# process was executing the run, so this attempt did not start.")
RUN_LOCKED = _refusal(
    "run-locked",
    "Another process is executing this run right now (single executor per run).",
    "wait until it has ended (`relay runs NAME`), then try again",
    recorded=True,
)
RUN_NOT_FOUND = _error(
    "run-not-found", "No run folder for that run id.", "`relay runs NAME`", exit=2
)
RUN_RECORD_DAMAGED = _error(
    "run-record-damaged",
    "A run's own file (run.json, its result, its DBOS folder) is missing or unreadable.",
    "restore the run folder from a copy, or " + _NEW_RUN,
)
RUN_REJECTED = _error(
    "run-rejected",
    "A run attempt refused before starting: changed binding, spent budget, passed deadline.",
    "the message names the cause; usually " + _NEW_RUN,
)
WORKSPACE_READ_ONLY = _error(
    "workspace-read-only",
    "The workspace's file system is mounted read-only: nothing could be written there.",
    "remount it read-write, or point `--home` or `RELAY_HOME` at a folder you can write",
)
WORKSPACE_ERROR = _error(
    "workspace-error",
    "The workspace folder cannot be used (not a directory, not writable).",
    "point `--home` or `RELAY_HOME` at a folder you can write",
    exit=2,
)
USAGE = Code(
    "usage",
    "The command line itself is wrong: unknown command, missing or conflicting arguments.",
    "`relay --help`, `relay COMMAND --help` or `%relay?`",
    raised=True,
    exit=2,
)
INTERNAL_ERROR = Code(
    "internal-error",
    "A bug in relay_notebook; rerun with `RELAY_DEBUG=1` for a traceback and report it.",
    "`RELAY_DEBUG=1 relay ...`, and report the traceback",
    raised=True,
    recorded=True,
)

# -- recorded: a run's error, the recovery preview, the REST API's own refusals ---------------
INTERRUPTED = _run(
    "interrupted",
    "The attempt's process ended before the run finished; recover the run.",
    _RECOVER,
)
RELAY_RAISED = _run(
    "relay-raised",
    "The relay raised an exception: the run failed and is never restarted.",
    "fix the relay (the traceback names the cell line), then `relay run NAME`",
)
RELAY_IMPORT_FAILED = _run(
    "relay-import-failed",
    "Importing the relay's module failed (top-level code raised).",
    "fix the module's top-level code, then `relay run NAME`",
)
RESULT_NOT_JSON = _run(
    "result-not-json",
    "run() returned a value that JSON cannot hold.",
    "return dicts, lists, strings, numbers, booleans or None",
)
RESULT_TOO_LARGE = _run(
    "result-too-large",
    "run() returned more than 128 KiB of JSON.",
    "write large results to a file under `run_dir()` and return its name",
)
DEADLINE_EXCEEDED = _run(
    "deadline-exceeded",
    "The run passed its deadline (one hour by default) and was stopped.",
    _NEW_RUN,
)
MAX_RECOVERY_ATTEMPTS_EXCEEDED = _run(
    "max-recovery-attempts-exceeded",
    "DBOS stopped recovering the workflow (its max_recovery_attempts was exceeded).",
    _NEW_RUN,
)
NONDETERMINISTIC_REPLAY = _run(
    "nondeterministic-replay",
    "On recovery the workflow called different steps than before.",
    "move what differs between attempts into a step (`relay check NAME` lists them), then "
    "`relay run NAME`",
)
FINISHED = Code(
    "finished",
    "The run succeeded or failed already; recovering it returns it as it was and runs nothing.",
    _NEW_RUN,
    sections=("recovery",),
    recorded=True,
)
CANCELLED_IN_DBOS = Code(
    "cancelled-in-dbos",
    "The run's workflow was cancelled with DBOS's own tool (`dbos workflow cancel`): DBOS will "
    "not run it, so the run is `cancelled` and recovering it runs nothing.",
    "resume it: `dbos workflow resume RUN -s URL`, then " + _RECOVER + "; or " + _NEW_RUN,
    sections=("recovery", "runs"),
    recorded=True,
)
WAITING = Code(
    "waiting",
    "The run waits with no process: for a message on a topic (`DBOS.recv`) or a durable "
    "sleep's timer. It resumes when the message arrives or the timer is due.",
    "answer it: `relay send RUN TOPIC JSON`; a due timer: `relay wake`",
    sections=("recovery", "runs"),
    recorded=True,
)
RUN_NOT_WAITING = _error(
    "run-not-waiting",
    "A message was sent to a run that has finished (or cannot receive): nothing was delivered.",
    "start a new run: `relay run NAME`",
)
FORBIDDEN = Code(
    "forbidden",
    "The Jupyter server refused the request (HTTP 403): no valid token or login, or its "
    "authorizer denied it. Send 'Authorization: token TOKEN'.",
    "send `Authorization: token TOKEN` (`jupyter server list` shows the token)",
    sections=("rest",),
    recorded=True,
)
ROUTE_NOT_FOUND = Code(
    "route-not-found",
    "No REST API route matches the URL (HTTP 404); see openapi.yaml.",
    "see `openapi.yaml`",
    sections=("rest",),
    recorded=True,
)
METHOD_NOT_ALLOWED = Code(
    "method-not-allowed",
    "The route exists, but not for this HTTP method (HTTP 405).",
    "see `openapi.yaml`",
    sections=("rest",),
    recorded=True,
)
HTTP_ERROR = Code(
    "http-error",
    "Another refusal by the Jupyter server itself; the message says which.",
    "",
    sections=("rest",),
    recorded=True,
)

_ERRORS = [v for v in list(globals().values()) if isinstance(v, Code) and "errors" in v.sections]
_RECORDED = [
    INTERRUPTED,
    RELAY_RAISED,
    RELAY_IMPORT_FAILED,
    RESULT_NOT_JSON,
    RESULT_TOO_LARGE,
    DEADLINE_EXCEEDED,
    MAX_RECOVERY_ATTEMPTS_EXCEEDED,
    NONDETERMINISTIC_REPLAY,
    FINISHED,
    CANCELLED_IN_DBOS,
    FORBIDDEN,
    ROUTE_NOT_FOUND,
    METHOD_NOT_ALLOWED,
    HTTP_ERROR,
]

#: every code, by its text; within a section, docs/errors.md lists them in this order
REGISTRY: dict[str, Code] = {
    c.code: c for c in [*_ERRORS, *_RECORDED, *ADMISSION, *LINT, *ANNOTATIONS, *AGENTWORKS_CODES]
}


def meanings(section: Section) -> dict[str, str]:
    """``{code: meaning}`` of one section (the source layer's ``CODES`` tables)."""
    return {c.code: c.meaning for c in REGISTRY.values() if section in c.sections}
