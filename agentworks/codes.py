"""The registry's entry type, and the codes agentworks raises or records.

agentworks never imports relay_notebook, so the codes it emits are defined here and
``relay_notebook.errors.codes`` adds them to the one registry that ``docs/errors.md`` is generated
from (``python tools/make_error_docs.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "AGENTWORKS_CODES",
    "AGENTWORKS_ERROR",
    "AGENT_ERROR",
    "AGENT_OUTPUT_INVALID",
    "MCP_ERROR",
    "MCP_SERVERS_INVALID",
    "NEEDS_RECONCILIATION",
    "NESTED_CALL",
    "NOT_IN_RUN",
    "PROVIDER_ERROR",
    "SECRET_LEAK",
    "TOOL_ARGUMENTS_INVALID",
    "TOOL_DEFINITION",
    "TOOL_ERROR",
    "TOOL_RESULT_INVALID",
    "VAULT_MISSING",
    "Code",
    "Section",
]

#: the tables of docs/errors.md, in the order they are printed
Section = Literal[
    "errors", "admission", "lint", "annotations", "runs", "recovery", "rest", "agentworks"
]


@dataclass(frozen=True)
class Code:
    """One stable code: what it means, what the user does next, and how the kit emits it.

    ``raised``: an exception carries it (its ``code``); ``recorded``: a record holds it as
    ``{"code", "message"}`` (run.json, outcome.json, the ledger, the recovery preview, a REST
    body). Source diagnostics are neither: they are reported in a list, one line each.
    ``exit`` is the ``relay`` CLI's exit status when the code ends a command.
    """

    code: str
    meaning: str
    hint: str = ""
    sections: tuple[Section, ...] = ("errors",)
    raised: bool = False
    recorded: bool = False
    exit: int = 1

    def record(self, message: str, **extra: Any) -> dict[str, Any]:
        """The ``{"code", "message", ...}`` a record holds for this code (the only way to build
        one: a test refuses literal ``"code": "..."`` entries anywhere else)."""
        return {"code": self.code, "message": message, **extra}


def _raised(code: str, meaning: str, hint: str = "") -> Code:
    return Code(code, meaning, hint, sections=("agentworks",), raised=True)


AGENTWORKS_ERROR = _raised(
    "agentworks-error", "Base of the adapter's errors; `code` is stable and listed here."
)
AGENT_ERROR = _raised(
    "agent-error",
    "An agent call that cannot go on: bad arguments, too many turns, an unknown tool.",
)
AGENT_OUTPUT_INVALID = _raised(
    "agent-output-invalid",
    "The agent's final message is not JSON, or does not match `output_schema`.",
)
MCP_ERROR = _raised("mcp-error", "An MCP server is unknown, not allowed for this relay, or failed.")
MCP_SERVERS_INVALID = Code(
    "mcp-servers-invalid",
    "The workspace's `mcp_servers.yaml` does not declare its MCP servers validly: a setting of "
    "the wrong type or transport, an unknown setting, a malformed `vault:NAME` reference.",
    "fix the line named in `mcp_servers.yaml`, then `relay check NAME`",
    sections=("admission", "agentworks"),
    raised=True,
)
NESTED_CALL = _raised("nested-call", "An agent or MCP call made from inside a tool callback.")
NOT_IN_RUN = _raised(
    "not-in-run",
    "A platform call (agent, mcp, vault, admit...) made outside a relay run.",
    "run the relay: `relay run NAME` or `%relay run NAME`",
)
PROVIDER_ERROR = _raised("provider-error", "The model provider failed or is misconfigured.")
SECRET_LEAK = _raised(
    "secret-leak",
    "A vault value was about to be persisted (a step argument or result, a receipt).",
    "pass the secret's name and read its value with `vault(NAME)` where it is used",
)
TOOL_DEFINITION = _raised(
    "tool-definition",
    "A `@tool` that cannot be exposed: missing annotations, unsupported types.",
)
TOOL_ERROR = _raised("tool-error", "A tool call failed: invalid arguments, or the tool raised.")
TOOL_RESULT_INVALID = _raised(
    "tool-result-invalid",
    "A tool returned something that is not JSON or does not match its output model.",
)
TOOL_ARGUMENTS_INVALID = _raised(
    "tool-arguments-invalid",
    "A tool call's arguments do not match its schema; the body did not run.",
)
VAULT_MISSING = _raised(
    "vault-missing",
    "A secret is missing from the vault (and from the environment).",
    "`relay vault set NAME` (the value is read from stdin)",
)
NEEDS_RECONCILIATION = Code(
    "needs-reconciliation",
    "A platform call or tool call was interrupted before its result was saved, so it may or "
    "may not have had its effect; recovery stops until you say which (exit status 4).",
    "`relay reconcile RUN --result JSON` (its result) or `relay reconcile RUN --retry`, "
    "then `relay recover RUN`",
    sections=("runs", "recovery"),
    recorded=True,
    exit=4,
)

#: every code above, in the order docs/errors.md lists them
AGENTWORKS_CODES = (
    AGENT_ERROR,
    AGENT_OUTPUT_INVALID,
    AGENTWORKS_ERROR,
    MCP_ERROR,
    MCP_SERVERS_INVALID,
    NESTED_CALL,
    NOT_IN_RUN,
    PROVIDER_ERROR,
    SECRET_LEAK,
    TOOL_DEFINITION,
    TOOL_ERROR,
    TOOL_RESULT_INVALID,
    VAULT_MISSING,
    TOOL_ARGUMENTS_INVALID,
    NEEDS_RECONCILIATION,
)
