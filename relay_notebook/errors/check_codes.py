"""The codes ``relay check`` reports: admission errors, determinism lint, legacy annotations.

Part of the registry of stable codes (``relay_notebook.errors.codes``, which lists these in
``REGISTRY``); kept apart because they are a table of the static analysis' own vocabulary, read
by the source layer as its ``CODES`` tables, and never raised or recorded in a run.
"""

from __future__ import annotations

from agentworks.codes import Code, Section

__all__ = ["ADMISSION", "ANNOTATIONS", "LINT", "MCP_SECRET_UNSET", "MISSING_AWAIT", "SYNTAX_ERROR"]


def _diagnostic(section: Section, code: str, meaning: str) -> Code:
    return Code(code, meaning, sections=(section,))


SYNTAX_ERROR = _diagnostic("admission", "syntax-error", "The source does not parse as Python.")
MCP_SECRET_UNSET = _diagnostic(
    "admission",
    "mcp-secret-unset",
    "A warning, never blocking: an MCP server the relay may use takes an `env:` or `headers:` "
    "value from a vault secret that is not set, so a run stops when it starts the server; "
    "`relay vault set NAME`.",
)
ADMISSION = [
    SYNTAX_ERROR,
    *(
        _diagnostic("admission", code, meaning)
        for code, meaning in [
            ("missing-entrypoint", "The module defines no top-level `run` function."),
            ("duplicate-entrypoint", "The module defines `run` more than once."),
            ("entrypoint-not-workflow", "`run(INPUT)` is not decorated with @DBOS.workflow()."),
            (
                "entrypoint-signature",
                "`run` takes neither `(INPUT)` nor the legacy `(INPUT, ctx)`.",
            ),
            (
                "dbos-decorator-not-called",
                "A DBOS decorator lacks its parentheses, so importing fails.",
            ),
            ("dbos-not-imported", "`DBOS` is used but never imported or defined."),
            ("dbos-launch-forbidden", "The source launches DBOS, which only the runner may do."),
            (
                "dbos-destroy-forbidden",
                "The source destroys or resets DBOS, which only the runner may do.",
            ),
            ("dbos-config-forbidden", "The source configures DBOS, which only the runner may do."),
            (
                "dbos-transaction-removed",
                "`@DBOS.transaction` was removed in DBOS 3; use a datasource's "
                "`@ds.transaction()`.",
            ),
            (
                "dbos-queue-constructed",
                "`Queue(...)` cannot be constructed in DBOS 3.4; use `DBOS.register_queue`.",
            ),
            (
                "durability-needs-dbos",
                "`relay_durability: none` is set for a @DBOS.workflow relay, which needs DBOS.",
            ),
        ]
    ),
    MCP_SECRET_UNSET,
]
MISSING_AWAIT = _diagnostic(
    "lint", "missing-await", "An async step or helper is called in a workflow body without await."
)
LINT = [
    *(
        _diagnostic("lint", code, meaning)
        for code, meaning in [
            ("nondeterministic-time", "A workflow body reads the clock; read it in a step."),
            (
                "nondeterministic-random",
                "A workflow body draws random numbers; draw them in a step.",
            ),
            ("nondeterministic-uuid", "A workflow body makes a random UUID; make it in a step."),
            (
                "env-read-in-workflow",
                "A workflow body reads environment variables; use variables or a step.",
            ),
            (
                "io-in-workflow",
                "A workflow body does file, network or process I/O; do it in a step.",
            ),
            (
                "set-iteration",
                "A workflow body iterates over a set, whose order differs between processes.",
            ),
            ("sleep-in-workflow", "A workflow body sleeps without DBOS; use DBOS.sleep_async."),
            (
                "introspection-in-workflow",
                "A workflow body reads DBOS history, which is checkpointed whole.",
            ),
            (
                "toplevel-side-effect",
                "Module-level code has an effect that runs on every import.",
            ),
        ]
    ),
    MISSING_AWAIT,
]
ANNOTATIONS = [
    _diagnostic("annotations", code, meaning)
    for code, meaning in [
        (
            "annotation-tokenize",
            "The source is not valid Python tokens, so no annotation was read.",
        ),
        (
            "annotation-placement",
            "A `# @relay` comment follows code on its line instead of its own.",
        ),
        ("annotation-keyword", "The word after `# @relay` is not `node` or `edge`."),
        (
            "annotation-json",
            "The text after `# @relay node` or `# @relay edge` is not one JSON object.",
        ),
        (
            "annotation-node-id",
            "A node `id` is missing or not a letter then letters, digits, `_`, `-`.",
        ),
        ("annotation-duplicate-id", "Two `# @relay node` annotations declare the same `id`."),
        (
            "annotation-node-type",
            "A node `type` is not one of input, agent, script, decision, output.",
        ),
        (
            "annotation-label",
            "A label is missing (nodes), empty, over 200 characters or not one line.",
        ),
        (
            "annotation-field",
            "A node or edge annotation has a field that is not part of the format.",
        ),
        ("annotation-field-type", "An optional node field has the wrong JSON type."),
        (
            "annotation-edge-end",
            "An edge `from` or `to` is missing or names no declared node.",
        ),
        ("annotation-duplicate-edge", "Two edges have the same `from`, `to` and `label`."),
        # the limits are source.annotations.MAX_NODES / MAX_EDGES (a test keeps them in step)
        ("annotation-too-many-nodes", "More than 200 nodes are declared."),
        ("annotation-too-many-edges", "More than 400 edges are declared."),
    ]
]
