"""Agents of Pydantic AI and the OpenAI Agents SDK in a relay, found in its text.

A relay written as those frameworks document their DBOS integration builds its agent at module
level (``agent = Agent(model, name=...)``, ``dbos_agent = DBOSAgent(agent)``; or the Agents
SDK's ``Agent(name=..., tools=[...])`` run by ``DBOSRunner.run(agent, ...)``) and runs it from
the workflow. The flow graph cannot follow a method of a module-level object, so those calls
are recognised here and drawn as an ``agent`` node listing the agent's model, tools and MCP
servers, and the DBOS step names its calls get at run time (``steps``: what ``--crash`` and
``relay fork --from`` can name). Only literal text is read; nothing is imported. A relay that
imports neither framework costs one look at its imports.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Final

from relay_notebook.source.module_index import ModuleIndex
from relay_notebook.source.source_text import MISSING, SourceText, id_base, literal, short

__all__ = ["FrameworkAgent", "FrameworkAgents", "find_framework_agents"]

_ROOTS: Final = ("pydantic_ai", "agents", "dbos_openai_agents")
_PYDANTIC_AGENT: Final = ("pydantic_ai.Agent", "pydantic_ai.agent.Agent")
_DBOS_AGENT: Final = "pydantic_ai.durable_exec.dbos.DBOSAgent"
_DURABILITY: Final = "pydantic_ai.durable_exec.dbos.DBOSDurability"
_OPENAI_AGENT: Final = ("agents.Agent", "agents.agent.Agent")
_RUNNER: Final = "dbos_openai_agents.DBOSRunner"
_RUN_METHODS: Final = ("run", "run_sync")
#: the one step name the OpenAI Agents integration gives every model request
OPENAI_MODEL_STEP: Final = "_model_call_step"


@dataclass
class FrameworkAgent:
    """One module-level agent: its framework, name, model text, tools and MCP servers."""

    variable: str
    framework: str
    line: int
    name: str | None = None
    model: str | None = None
    tools: list[str] = field(default_factory=list)
    #: tools that are also ``@DBOS.step`` functions (so calls of their own, crash points)
    step_tools: list[str] = field(default_factory=list)
    mcp_servers: list[str] = field(default_factory=list)
    durable: bool = False

    def steps(self) -> list[str]:
        """The DBOS step names this agent's calls get at run time."""
        if self.framework == "openai_agents":
            return [OPENAI_MODEL_STEP, *self.step_tools]
        prefix = self.name or self.variable
        mcp = [f"{prefix}__mcp_server__{s}.call_tool" for s in self.mcp_servers]
        return [f"{prefix}__model.request", *mcp, *self.step_tools]

    def node(self) -> tuple[str, str, dict[str, Any]]:
        """The (label, id base, details) of an ``agent`` node for a run of this agent."""
        shown = self.name or self.variable
        details: dict[str, Any] = {"framework": self.framework, "name": shown}
        if self.model:
            details["model"] = self.model
        details["tools"] = list(self.tools)
        details["mcp"] = list(self.mcp_servers)
        details["steps"] = self.steps()
        return short(shown), id_base("agent", shown), details


class FrameworkAgents:
    """The framework agents of one module, and which calls of ``run`` run them."""

    def __init__(self, module: ast.Module, index: ModuleIndex, text: SourceText) -> None:
        self.index = index
        self.text = text
        self.agents: dict[str, FrameworkAgent] = {}
        tools, steps = _decorated(module, index)
        for stmt in module.body:
            if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
                continue
            targets = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            if targets:
                self._assigned(targets[0], stmt.value, tools, steps)

    def _assigned(
        self, variable: str, call: ast.Call, tools: dict[str, list[str]], steps: set[str]
    ) -> None:
        made = self.index.qualify(call.func)
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        if made in _PYDANTIC_AGENT or made in _OPENAI_AGENT:
            framework = "pydantic_ai" if made in _PYDANTIC_AGENT else "openai_agents"
            agent = FrameworkAgent(variable, framework, call.lineno)
            name = literal(kw["name"]) if "name" in kw else MISSING
            agent.name = name if isinstance(name, str) else None
            model = kw.get("model") or (call.args[0] if call.args else None)
            if model is not None:
                named = literal(model)
                agent.model = named if isinstance(named, str) else short(self.text.of(model), 60)
            listed = [self._label(t) for t in _items(kw.get("tools"))]
            agent.tools = listed + tools.get(variable, [])
            agent.step_tools = [t for t in agent.tools if t in steps]
            agent.mcp_servers = [self._server(t) for t in _items(kw.get("toolsets"))]
            agent.mcp_servers += [self._server(t) for t in _items(kw.get("mcp_servers"))]
            agent.durable = any(
                isinstance(c, ast.Call) and self.index.qualify(c.func) == _DURABILITY
                for c in _items(kw.get("capabilities"))
            )
            self.agents[variable] = agent
        elif made == _DBOS_AGENT and call.args and isinstance(call.args[0], ast.Name):
            wrapped = self.agents.get(call.args[0].id)
            if wrapped is not None:
                name = literal(kw["name"]) if "name" in kw else MISSING
                agent = FrameworkAgent(**{**wrapped.__dict__, "variable": variable})
                agent.name = name if isinstance(name, str) else wrapped.name
                agent.durable = True
                self.agents[variable] = agent

    def _label(self, node: ast.expr) -> str:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            return node.args[0].id  # Tool(lookup, ...), function_tool(lookup)
        return short(self.text.of(node), 40)

    def _server(self, node: ast.expr) -> str:
        """An MCP toolset by its ``id=`` (what names its steps), else as written."""
        if isinstance(node, ast.Call):
            for k in node.keywords:
                value = literal(k.value) if k.arg == "id" else MISSING
                if isinstance(value, str):
                    return value
        return short(self.text.of(node), 40)

    def agent_run(self, call: ast.Call) -> FrameworkAgent | None:
        """The agent ``call`` runs durably (``dbos_agent.run(...)``, ``agent.run(...)`` with
        ``DBOSDurability``, ``DBOSRunner.run(agent, ...)``), if it is one."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in _RUN_METHODS):
            return None
        if isinstance(func.value, ast.Name) and func.value.id in self.agents:
            agent = self.agents[func.value.id]
            return agent if agent.durable else None
        if self.index.qualify(func.value) == _RUNNER and call.args:
            first = call.args[0]
            if isinstance(first, ast.Name) and first.id in self.agents:
                return self.agents[first.id]
        return None


def _items(node: ast.expr | None) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, ast.List | ast.Tuple) else []


def _decorated(module: ast.Module, index: ModuleIndex) -> tuple[dict[str, list[str]], set[str]]:
    """Tools registered with ``@AGENT.tool`` / ``@AGENT.tool_plain`` (by agent variable), and
    the module functions decorated ``@DBOS.step`` (under any other decorator)."""
    tools: dict[str, list[str]] = {}
    steps: set[str] = set()
    for stmt in module.body:
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in stmt.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if (
                isinstance(target, ast.Attribute)
                and target.attr in ("tool", "tool_plain")
                and isinstance(target.value, ast.Name)
            ):
                tools.setdefault(target.value.id, []).append(stmt.name)
            elif index.qualify(target) == "dbos.DBOS.step":
                steps.add(stmt.name)
    return tools, steps


def find_framework_agents(
    module: ast.Module, index: ModuleIndex, text: SourceText
) -> FrameworkAgents | None:
    """The module's framework agents, or None when it imports no agent framework."""
    if not any(q.split(".")[0] in _ROOTS for q in index.imports.values()):
        return None
    found = FrameworkAgents(module, index, text)
    return found if found.agents else None
