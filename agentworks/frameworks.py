"""Which DBOS steps of agent frameworks' DBOS integrations are model requests or MCP calls.

Design note: Pydantic AI (``DBOSAgent``, ``DBOSDurability``) and the OpenAI Agents SDK
(``dbos_openai_agents.DBOSRunner``) make each model request (and Pydantic AI each MCP call) a
``@DBOS.step`` of their own, decorated while the relay is imported, so through the child's
instrumented ``DBOS.step``. Their step names are the frameworks' persisted compatibility data
(they never change), so the name says what a step is: ``step_role``. The child records each
such call's receipt and tokens (``agentworks.framework_calls``); history gives the steps their
kinds and fork rebuilds a model's answer (``relay_notebook.runner.framework_answers``) by it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FrameworkStep", "framework_plumbing", "step_role"]

#: Pydantic AI's step names: ``AGENT__model.request[.MODEL_ID]`` and its stream variant,
#: ``AGENT__mcp_server__ID.call_tool`` (its ``get_tools`` and ``get_instructions`` are plumbing)
_PYDANTIC_MODEL = ("__model.request", "__model.request_stream")
_PYDANTIC_MCP = "__mcp_server__"
_PYDANTIC_PLUMBING = (".get_tools", ".get_instructions")
#: the OpenAI Agents SDK's one model step (``dbos_openai_agents.runner``)
_OPENAI_MODEL = "_model_call_step"


@dataclass(frozen=True)
class FrameworkStep:
    """What a framework's step is: ``kind`` ``model`` or ``mcp``, its framework and the agent
    (Pydantic AI's step prefix) or MCP server it belongs to."""

    kind: str
    framework: str
    owner: str | None


def step_role(name: str, module: str | None = None) -> FrameworkStep | None:
    """The framework call a step named ``name`` (defined in ``module``, if known) is, if any."""
    if name == _OPENAI_MODEL and (module is None or module.startswith("dbos_openai_agents")):
        return FrameworkStep("model", "openai_agents", None)
    agent, sep, rest = name.partition("__")
    if not sep:
        return None
    if any(("__" + rest).startswith(m) for m in _PYDANTIC_MODEL):
        return FrameworkStep("model", "pydantic_ai", agent)
    if ("__" + rest).startswith(_PYDANTIC_MCP) and rest.endswith(".call_tool"):
        server = rest[len(_PYDANTIC_MCP) - 2 : -len(".call_tool")]
        return FrameworkStep("mcp", "pydantic_ai", f"{agent}/{server}")
    return None


def framework_plumbing(name: str) -> bool:
    """Whether a step named ``name`` is a framework's plumbing, not a call of its agent:
    Pydantic AI's ``AGENT__mcp_server__ID.get_tools`` and ``.get_instructions``."""
    return _PYDANTIC_MCP in name and name.endswith(_PYDANTIC_PLUMBING)
