"""Regenerate docs/errors.md from the code registry (``relay_notebook.errors.codes.REGISTRY``).

Run ``python tools/make_error_docs.py`` after adding or changing a code; a test fails while the
committed page differs from what this prints.
"""

from __future__ import annotations

from pathlib import Path

from relay_notebook.errors.codes import REGISTRY, Code, Section

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "errors.md"

HEAD = """\
# Error and diagnostic codes

Every error the kit reports ends with a stable code in brackets, e.g. `[relay-not-found]`.
Codes never change meaning; each is defined once in `relay_notebook/errors/codes.py` (the
adapter's in `agentworks/codes.py`) with what it means and what to type next. This page is
generated from there: regenerate it with `python tools/make_error_docs.py` (a test keeps the two
in step).
*Raised* codes end an exception (`RelayError.code`, `AgentworksError.code`); *recorded* codes are
kept as `{"code", "message"}` in run.json, the ledger, the recovery preview or a REST body."""

#: section → (title, intro, columns): "exit", "how" and "next" besides code and meaning; the
#: tables of codes several sections share are sorted by code, the others keep the registry's order
SECTIONS: dict[Section, tuple[str, str, tuple[str, ...]]] = {
    "errors": (
        "Errors",
        "Raised by commands (`relay ...`, and the `%relay` magics). Exit status 2 means bad "
        "input, 1 a failure.",
        ("exit", "how", "next"),
    ),
    "admission": (
        "Admission errors",
        "Decided from the AST on every `%%relay` cell, `relay check` and before `publish`. "
        "Any of them blocks publishing, except those whose entry says it is a warning.",
        (),
    ),
    "lint": (
        "Determinism lint (warnings)",
        "What the AST can see in workflow code that would differ between the first run and a "
        "recovery. Warnings never block.",
        (),
    ),
    "annotations": (
        "Legacy graph annotations (warnings)",
        "`# @relay node` / `# @relay edge` comments in `run(INPUT, ctx)` programs. An invalid "
        "set draws no annotated graph; it never blocks checking, running or publishing.",
        (),
    ),
    "runs": (
        "Run errors",
        "The `error.code` of a run that did not succeed (`relay run --json`, `relay logs`, "
        "run.json). `interrupted` runs exit 3 and can be recovered, `needs-reconciliation` "
        "runs exit 4; the others exit 1. A queued run the worker pool refused keeps the "
        "refusal's code (`binding-changed`, `deadline-passed`, ...).",
        ("next",),
    ),
    "recovery": (
        "Recovery preview",
        "The `reason.code` of what would stop `relay recover RUN` (`%relay preview RUN`, "
        "`relay logs RUN --json`, the panel): the checks recovery makes that need no code.",
        ("next",),
    ),
    "rest": (
        "REST API (HTTP level)",
        "The `error.code` of a refusal by the Jupyter server itself, before any relay command "
        "runs. Errors from commands keep their codes above, mapped to HTTP statuses: 404 for a "
        "missing relay, release or run, 400 other bad input, 422 `admission-failed` and "
        "`idempotency-key-reused`, 409 other refusals, 500 `internal-error`.",
        ("next",),
    ),
    "agentworks": (
        "agentworks errors",
        "Raised inside a run by the adapter; authored code can catch them.",
        ("next",),
    ),
}

SORTED: frozenset[Section] = frozenset({"errors", "runs", "recovery"})


def _how(code: Code) -> str:
    return ", ".join(w for w, on in (("raised", code.raised), ("recorded", code.recorded)) if on)


def _cell(code: Code, column: str) -> str:
    if column == "exit":
        return str(code.exit)
    if column == "how":
        return _how(code)
    return code.hint


def render() -> str:
    """The text of docs/errors.md."""
    out = [HEAD]
    for section, (title, intro, columns) in SECTIONS.items():
        names = (
            ("code", *columns[:-1], "meaning", *columns[-1:]) if columns else ("code", "meaning")
        )
        out += ["", f"## {title}", "", intro, ""]
        out += ["| " + " | ".join(names) + " |", "|" + " --- |" * len(names)]
        rows = [c for c in REGISTRY.values() if section in c.sections]
        if section in SORTED:
            rows.sort(key=lambda c: c.code)
        for code in rows:
            cells = {"code": f"`{code.code}`", "meaning": code.meaning}
            cells |= {c: _cell(code, c) for c in columns}
            out.append("| " + " | ".join(cells[n] for n in names) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    DOC.write_text(render(), encoding="utf-8")


if __name__ == "__main__":
    main()
