"""Regenerate docs/errors.md from the error classes and CODES tables (run after adding a code)."""

from __future__ import annotations

import importlib
from pathlib import Path

import agentworks.errors
import agentworks.tools
from relay_notebook import errors

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = [
    (
        "Admission errors",
        "relay_notebook.source.admission",
        "Decided from the AST on every `%%relay` cell, `relay check` and before `publish`. "
        "Any of them blocks publishing.",
    ),
    (
        "Determinism lint (warnings)",
        "relay_notebook.source.lint",
        "What the AST can see in workflow code that would differ between the first run and a "
        "recovery. Warnings never block.",
    ),
    (
        "Legacy graph annotations (warnings)",
        "relay_notebook.source.annotations",
        "`# @relay node` / `# @relay edge` comments in `run(INPUT, ctx)` programs. An invalid "
        "set draws no annotated graph; it never blocks checking, running or publishing.",
    ),
    (
        "Run errors",
        "relay_notebook.runner.outcome",
        "The `error.code` of a run that did not succeed (`relay run --json`, `relay logs`, "
        "run.json). `interrupted` runs exit 3 and can be recovered; the others exit 1.",
    ),
    (
        "REST API (HTTP level)",
        "relay_notebook.server.handlers",
        "The `error.code` of a refusal by the Jupyter server itself, before any relay command "
        "runs. Errors from commands keep their codes above, mapped to HTTP statuses: 404 for a "
        "missing relay, release or run, 400 other bad input, 422 `admission-failed` and "
        "`idempotency-key-reused`, 409 other refusals, 500 `internal-error`.",
    ),
]


def first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0].replace("``", "`")


def main() -> None:
    out = [
        "# Error and diagnostic codes",
        "",
        "Every error the kit reports ends with a stable code in brackets, e.g. "
        "`[relay-not-found]`.",
        "Codes never change meaning; new ones are added here (a test keeps this page and the "
        "code in step; regenerate it with `python tools/gen_errors_doc.py`).",
        "",
        "## Errors",
        "",
        "Raised by commands (`relay ...`, and the `%relay` magics). Exit status 2 means bad "
        "input, 1 a failure.",
        "",
        "| code | exit | meaning |",
        "| --- | --- | --- |",
    ]
    for name in errors.__all__:
        cls = getattr(errors, name)
        out.append(f"| `{cls.code}` | {cls.exit_code} | {first_line(cls.__doc__)} |")
    out.append(
        "| `usage` | 2 | The command line itself is wrong: unknown command, missing or "
        "conflicting arguments. |"
    )
    out.append(
        "| `internal-error` | 1 | A bug in relay_notebook; rerun with `RELAY_DEBUG=1` for a "
        "traceback and report it. |"
    )
    for title, module, intro in SECTIONS:
        codes = importlib.import_module(module).CODES
        out += ["", f"## {title}", "", intro, "", "| code | meaning |", "| --- | --- |"]
        out += [f"| `{k}` | {v} |" for k, v in codes.items()]
    out += [
        "",
        "## agentworks errors",
        "",
        "Raised inside a run by the adapter; authored code can catch them.",
        "",
        "| code | class | meaning |",
        "| --- | --- | --- |",
    ]
    classes = [getattr(agentworks.errors, n) for n in agentworks.errors.__all__]
    classes.append(agentworks.tools.ToolArgumentsError)
    for cls in classes:
        out.append(f"| `{cls.code}` | `{cls.__name__}` | {first_line(cls.__doc__)} |")
    (ROOT / "docs" / "errors.md").write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
