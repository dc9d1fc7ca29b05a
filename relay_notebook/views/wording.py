"""Wording for the surface a user is on: ``%relay …`` in a notebook, ``relay …`` in a terminal,
an API path in a REST response.

Design note: the layers below the boundaries (workspace, runner, history) word their hints as
terminal commands, once (``Recover it with: relay recover invoice-3``). Each boundary passes
its messages through ``reword`` for its own surface, and renders command results with the
``*_line`` helpers here, so the CLI, the magics and the REST API never carry near-copies of
the same sentence. Pure text: no IPython, no DBOS, no views (the run view's ``next`` hint in
``views.header`` is worded in the same style).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, Literal

from relay_notebook.errors import codes
from relay_notebook.record.backend import error_text

__all__ = [
    "API_PREFIX",
    "Surface",
    "access_line",
    "api_path",
    "broken_line",
    "command",
    "deleted_line",
    "duration_text",
    "error_text",
    "pending_lines",
    "published_line",
    "reconciled_line",
    "releases_lines",
    "reword",
    "verify_lines",
]

Surface = Literal["notebook", "terminal", "api"]

#: where the server extension mounts the REST API (relative to the server's base_url)
API_PREFIX: Final = "relay/api"
_COMMANDS: Final = (
    "run|runs|recover|logs|grant|revoke|reconcile|check|publish|releases|verify|graph|delete|"
    "relays|preview|steps|attempts|timeline|vault|workers|worker|test|fork|lineage|diff|send|"
    "wait|wake"
)
_WORD: Final = r"[A-Za-z][A-Za-z0-9_-]*"
#: ``relay CMD [ARG] [FLAGS]`` as the lower layers write it (never ``%relay`` or ``%%relay``)
_HINT: Final = re.compile(
    rf"(?<![\w%/.-])relay (?P<cmd>{_COMMANDS})\b"
    rf"(?P<arg> (?!--){_WORD}(?![\w/-]|\.[\w/]))?"
    r"(?P<flags>(?: --(?:result JSON|retry|force|accept-lost-checkpoints))*)"
)
_RUN_ID: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}-[0-9]+")


def command(surface: Surface, words: str) -> str:
    """``words`` as the user types them on ``surface`` (the API gets its route when it has one)."""
    if surface == "notebook":
        return f"%relay {words}"
    if surface == "api":
        return _reword_match(_HINT.fullmatch(f"relay {words}"), surface) or f"relay {words}"
    return f"relay {words}"


def api_path(cmd: str, arg: str | None, flags: str = "") -> str | None:
    """The REST operation that does what ``relay CMD ARG FLAGS`` does, or ``None``."""
    base = API_PREFIX
    name = arg or "NAME"
    run_id = arg or "RUN"
    if cmd == "run":
        return f"POST {base}/relays/{name}/runs"
    if cmd == "runs":
        return f"GET {base}/runs" + (f"?relay={arg}" if arg else "")
    if cmd in ("relays", "check") and (cmd == "relays" or arg):
        return f"GET {base}/relays" + (f"/{arg}" if cmd == "check" else "")
    if cmd in ("recover", "logs", "preview", "steps", "attempts"):
        tail = "/recover" if cmd == "recover" else ""
        return f"{'POST' if cmd == 'recover' else 'GET'} {base}/runs/{run_id}{tail}"
    if cmd in ("grant", "revoke"):
        return f"POST {base}/relays/{name}/{cmd}"
    if cmd == "reconcile":
        if "--result" in flags:
            return f'POST {base}/runs/{run_id}/reconcile {{"result": JSON}}'
        if "--retry" in flags:
            return f'POST {base}/runs/{run_id}/reconcile {{"retry": true}}'
        return f"GET {base}/runs/{run_id} (its pending_calls)"
    if cmd in ("publish", "releases"):
        return f"{'POST' if cmd == 'publish' else 'GET'} {base}/relays/{name}/releases"
    if cmd == "delete":
        if arg and _RUN_ID.fullmatch(arg):
            return f"DELETE {base}/runs/{arg}"
        return f"DELETE {base}/relays/{name}" + ("?force=true" if "--force" in flags else "")
    return None


def _reword_match(m: re.Match[str] | None, surface: Surface) -> str | None:
    if m is None:
        return None
    if surface == "notebook":
        return "%" + m.group(0)
    if surface == "api":
        arg = m.group("arg")
        return api_path(m.group("cmd"), arg.strip() if arg else None, m.group("flags") or "")
    return m.group(0)


def reword(text: str, surface: Surface) -> str:
    """``text`` with every ``relay COMMAND …`` hint worded for ``surface``."""
    if surface == "terminal":
        return text
    return _HINT.sub(lambda m: _reword_match(m, surface) or m.group(0), text)


# -- command results, one sentence each, for every surface ------------------------------------


def published_line(result: Any, surface: Surface) -> str:
    """``relay publish``: the release and whether this call made it."""
    rel = result.release
    state = "published" if result.created else "unchanged; already published as"
    line = f"{rel.relay}: {state} {rel.ref} ({rel.short_hash})"
    if surface != "notebook":
        line = f"{line}, {len(rel.files)} files"
    for r in getattr(result, "stranded", []):
        line += (
            f"\nwarning: in-flight run {r.run_id} ({r.run_status}) would not replay on {rel.ref}: "
            f"{r.message}; keep recovering it on its own release, or guard the change "
            f"({command(surface, f'check {rel.relay} --replay {r.run_id}')})"
        )
    return line


def releases_lines(name: str, found: Sequence[Any], surface: Surface) -> list[str]:
    """``relay releases NAME``: one line per release, or how to publish the first."""
    if not found:
        return [f"{name}: no releases yet (publish with: {command(surface, f'publish {name}')})"]
    if surface == "notebook":  # saved outputs hold no clock times (nbval compares them)
        return [f"{r.relay} {r.ref:<5} {r.short_hash}  {len(r.files)} files" for r in found]
    return [
        f"{r.relay} {r.ref:<5} {r.short_hash}  {r.created_at}  {len(r.files)} files" for r in found
    ]


def verify_lines(reports: Sequence[Any], surface: Surface) -> list[str]:
    """``relay verify``: each release checked, and every file that no longer matches."""
    lines = []
    for r in reports:
        head = f"{r.release.relay} {r.release.ref} ({r.release.short_hash})"
        if r.ok:
            files = "" if surface == "notebook" else f", {len(r.release.files)} files match"
            lines.append(f"{head}: ok{files}")
        else:
            lines.append(f"{head}: TAMPERED [{codes.RELEASE_TAMPERED.code}]")
            lines += [f"  {problem}" for problem in r.problems]
    return lines


def access_line(name: str, granted: bool, surface: Surface) -> str:
    """``relay grant`` / ``relay revoke``."""
    if granted:
        return f"{name}: access granted"
    return f"{name}: access revoked (restore with: {command(surface, f'grant {name}')})"


def pending_lines(run_id: str, pending: Sequence[Any], surface: Surface) -> list[str]:
    """``relay reconcile RUN`` without an action: the uncertain calls, and how to settle one."""
    if not pending:
        return [f"run {run_id}: no uncertain calls"]
    return [
        *(f"{p.key}  {p.describe()} (attempt {p.attempt})" for p in pending),
        f"resolve with: {command(surface, f'reconcile {run_id} --result JSON')} or "
        f"{command(surface, f'reconcile {run_id} --retry')}",
    ]


def reconciled_line(run_id: str, state: Any, surface: Surface) -> str:
    """``relay reconcile RUN --result JSON | --retry``: what happens next."""
    how = "will be retried" if state.state == "retry" else "resolved with the given result"
    return f"{state.key}: {how}. Continue with: {command(surface, f'recover {run_id}')}"


def broken_line(summary: Any, surface: Surface) -> str:
    """A relay whose draft fails admission, in a runs listing: its first problem, what to do."""
    check = command(surface, f"check {summary.name}")
    return f"{summary.name}: broken draft: {summary.problem} (all problems: {check})"


def deleted_line(deleted: Any) -> str:
    """``relay delete``: what went, and what was kept."""
    if deleted.kind == "run":
        return f"run {deleted.target}: deleted (its release, if any, is kept)"
    runs = f", {len(deleted.runs)} runs" if deleted.runs else ""
    releases = f", {deleted.releases} releases" if deleted.releases else ""
    return f"relay {deleted.target}: deleted (draft{releases}{runs})"


def duration_text(active_ms: float | None, wall_ms: float | None, attempts: int = 1) -> str:
    """A run's duration: the time its attempts ran, with the wall time beside when the run
    had time between attempts (more than one attempt); ``-`` before any attempt ended. Whether
    the wall time shows depends on the run, never on timing, so saved outputs stay stable."""
    if active_ms is None:
        return "-" if wall_ms is None else f"{wall_ms / 1000:.1f} s"
    text = f"{active_ms / 1000:.1f} s"
    if wall_ms is not None and attempts > 1:
        text += f" ({wall_ms / 1000:.1f} s wall)"
    return text
