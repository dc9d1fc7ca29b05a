"""The scripted model provider: turn selection, replay, script errors, and model resolution."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentworks.errors import ProviderError, VaultError
from agentworks.providers.base import AssistantTurn, ToolCall
from agentworks.providers.openai_compat import OpenAICompatProvider
from agentworks.providers.resolve import resolve_provider
from agentworks.providers.scripted import ScriptedProvider

SCRIPT = {
    "clerk": [
        {"tool_calls": [{"name": "lookup", "arguments": {"order": 7}}]},
        {"tool_calls": [{"name": "refund", "arguments": {"order": 7}, "id": "mine"}]},
        {"content": "refunded order 7"},
    ],
    "judge": [{"content": {"verdict": "ok", "score": 3}}],
}


def write(tmp_path: Path, data: Any, name: str = "turns.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def play(provider: ScriptedProvider, agent: str, messages: list[dict[str, Any]]) -> AssistantTurn:
    return asyncio.run(provider.complete(agent=agent, messages=messages, tools=[], model="x"))


def run_agent(provider: ScriptedProvider, agent: str) -> list[AssistantTurn]:
    """Drive a conversation the way the agent loop does, until a turn without tool calls."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    turns = []
    while True:
        turn = play(provider, agent, messages)
        turns.append(turn)
        messages.append(turn.to_message())
        if not turn.tool_calls:
            return turns
        for call in turn.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "{}"})


def never(name: str) -> str:
    raise VaultError(f"no secret {name}")


def test_turns_are_played_in_order_with_default_ids(tmp_path: Path) -> None:
    """Each turn of an agent's script comes back in order, tool calls with stable default ids."""
    provider = ScriptedProvider(write(tmp_path, SCRIPT))
    turns = run_agent(provider, "clerk")
    assert [t.tool_calls for t in turns] == [
        [ToolCall(id="call-clerk-0-0", name="lookup", arguments={"order": 7})],
        [ToolCall(id="mine", name="refund", arguments={"order": 7})],
        [],
    ]
    assert turns[-1].content == "refunded order 7"
    assert {t.model for t in turns} == {"scripted:turns.json"}


def test_turn_index_is_the_number_of_assistant_messages(tmp_path: Path) -> None:
    """The turn played depends only on the assistant messages already in the conversation."""
    provider = ScriptedProvider(write(tmp_path, SCRIPT))
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "assistant", "content": None, "tool_calls": []},
    ]
    assert play(provider, "clerk", history).content == "refunded order 7"


def test_restarted_call_replays_the_same_script(tmp_path: Path) -> None:
    """A call restarted from scratch (or made again by a fresh provider) gets the same turns."""
    path = write(tmp_path, SCRIPT)
    first = run_agent(ScriptedProvider(path), "clerk")
    provider = ScriptedProvider(path)
    assert run_agent(provider, "clerk") == first
    assert run_agent(provider, "clerk") == first


def test_json_content_is_serialized(tmp_path: Path) -> None:
    """A content given as a JSON value comes back as its JSON text, ready for output_schema."""
    turn = play(ScriptedProvider(write(tmp_path, SCRIPT)), "judge", [])
    assert turn.content is not None
    assert json.loads(turn.content) == {"verdict": "ok", "score": 3}


def test_running_past_the_script_says_how_many_turns_exist(tmp_path: Path) -> None:
    """Asking for a turn beyond the script names the agent, the turn count and the turn asked."""
    provider = ScriptedProvider(write(tmp_path, SCRIPT))
    with pytest.raises(ProviderError) as caught:
        play(provider, "judge", [{"role": "assistant", "content": "x"}])
    assert "script for agent 'judge'" in str(caught.value)
    assert "has 1 turn and turn 2 was requested" in str(caught.value)


def test_unknown_agent_lists_the_scripted_agents(tmp_path: Path) -> None:
    """An agent absent from the script fails with the names the script does have."""
    with pytest.raises(ProviderError, match=r"no turns for agent 'auditor'.*'clerk', 'judge'"):
        play(ScriptedProvider(write(tmp_path, SCRIPT)), "auditor", [])


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("{not json", "not valid JSON (line 1, column 2"),
        ([1, 2], "got an array"),
        ({"clerk": {"content": "x"}}, "agent 'clerk': expected a list of turns, got an object"),
        ({"clerk": ["hi"]}, "agent 'clerk', turn 1: expected an object, got a string"),
        ({"clerk": [{}]}, "turn 1: expected 'content' or 'tool_calls', got neither"),
        ({"clerk": [{"contnet": "x"}]}, "turn 1: unknown key 'contnet'"),
        ({"clerk": [{"tool_calls": [{"arguments": {}}]}]}, "tool call 1: 'name' must be"),
        (
            {"clerk": [{"content": "a"}, {"tool_calls": [{"name": "t", "arguments": [1]}]}]},
            "turn 2, tool call 1: 'arguments' must be an object, got an array",
        ),
    ],
)
def test_malformed_script_names_the_file_and_the_problem(
    tmp_path: Path, data: Any, expected: str
) -> None:
    """A malformed script fails when loaded, naming its path and what is wrong."""
    path = write(tmp_path, data)
    with pytest.raises(ProviderError) as caught:
        ScriptedProvider(path)
    assert str(path) in str(caught.value)
    assert expected in str(caught.value)


def test_missing_script_file(tmp_path: Path) -> None:
    """A script file that does not exist is reported with its path."""
    with pytest.raises(ProviderError, match="does not exist"):
        ScriptedProvider(tmp_path / "absent.json")


def test_resolve_scripted_relative_to_the_relay(tmp_path: Path) -> None:
    """'scripted:FILE' loads FILE beside the relay and reports the profile chosen."""
    (tmp_path / "fixtures").mkdir()
    write(tmp_path / "fixtures", SCRIPT, "t.json")
    provider, chosen = resolve_provider(
        "scripted:fixtures/t.json", default=None, base_dir=tmp_path, secret=never
    )
    assert isinstance(provider, ScriptedProvider)
    assert chosen == "scripted:fixtures/t.json"
    assert play(provider, "judge", []).model == "scripted:t.json"


def test_resolve_uses_the_default_profile(tmp_path: Path) -> None:
    """Without model=, the manifest's default profile is used."""
    write(tmp_path, SCRIPT)
    provider, chosen = resolve_provider(
        None, default="scripted:turns.json", base_dir=tmp_path, secret=never
    )
    assert isinstance(provider, ScriptedProvider)
    assert chosen == "scripted:turns.json"


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("scripted:/etc/passwd", "absolute path"),
        ("scripted:../outside.json", "outside the relay's folder"),
        ("scripted:a/../../outside.json", "outside the relay's folder"),
        ("scripted:", "names no script file"),
        ("openai:", "names no model"),
        ("gpt-4o", "expected 'scripted:FILE'"),
        ("anthropic:claude", "'openai:MODEL'"),
    ],
)
def test_resolve_rejects_bad_models(tmp_path: Path, model: str, expected: str) -> None:
    """Bad model strings fail before any call, saying which forms are accepted."""
    (tmp_path.parent / "outside.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    relay_dir = tmp_path / "relay"
    (relay_dir / "a").mkdir(parents=True)
    with pytest.raises(ProviderError, match=expected):
        resolve_provider(model, default=None, base_dir=relay_dir, secret=never)


def test_resolve_without_any_model_says_how_to_set_one(tmp_path: Path) -> None:
    """No model and no default: the error tells the author about model= and relay.yaml."""
    with pytest.raises(ProviderError, match=r"pass model=.*`model:` in relay\.yaml"):
        resolve_provider(None, default=None, base_dir=tmp_path, secret=never)


def test_resolve_openai_reads_base_url_and_key_from_the_vault(tmp_path: Path) -> None:
    """'openai:MODEL' takes its base URL and key from the vault; the key stays out of repr."""
    vault = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-hidden-123"}
    provider, chosen = resolve_provider(
        "openai:tiny", default="scripted:x.json", base_dir=tmp_path, secret=vault.__getitem__
    )
    assert isinstance(provider, OpenAICompatProvider)
    assert (provider.base_url, provider.model, chosen) == (
        "http://127.0.0.1:9/v1",
        "tiny",
        "openai:tiny",
    )
    assert "sk-hidden-123" not in repr(provider)


def test_resolve_openai_custom_server_needs_no_key(tmp_path: Path) -> None:
    """A custom base URL without a key in the vault is accepted (local servers need none)."""

    def secret(name: str) -> str:
        if name == "OPENAI_BASE_URL":
            return "http://127.0.0.1:9/v1"
        raise VaultError(f"no secret {name}")

    provider, _ = resolve_provider("openai:tiny", default=None, base_dir=tmp_path, secret=secret)
    assert isinstance(provider, OpenAICompatProvider)


def test_resolve_openai_public_server_requires_a_key(tmp_path: Path) -> None:
    """With no base URL in the vault the public API is used, and a missing key is a VaultError."""
    with pytest.raises(VaultError, match="OPENAI_API_KEY"):
        resolve_provider("openai:gpt-4o-mini", default=None, base_dir=tmp_path, secret=never)

    provider, _ = resolve_provider(
        "openai:gpt-4o-mini",
        default=None,
        base_dir=tmp_path,
        secret=lambda name: never(name) if name == "OPENAI_BASE_URL" else "sk-x",
    )
    assert isinstance(provider, OpenAICompatProvider)
    assert provider.base_url == "https://api.openai.com/v1"
