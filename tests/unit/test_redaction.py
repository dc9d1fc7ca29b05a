"""The redactor's walk, the log scrubber's stream and the journal's last check, without a run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentworks.errors import SecretLeakError
from agentworks.journal import Journal
from agentworks.redact import Redactor
from relay_notebook.runner.log_scrubber import StreamScrubber

SECRET = "tok-5ecret-Value-77"
REDACTOR = Redactor({"API_KEY": SECRET})


@dataclass
class Holder:
    value: Any


class Slotted:
    __slots__ = ("hidden",)

    def __init__(self, hidden: str) -> None:
        self.hidden = hidden

    def __repr__(self) -> str:
        return "Slotted()"


def nested(depth: int) -> Any:
    value: Any = {"k": SECRET}
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [60, 100_000])
def test_no_depth_hides_a_secret(depth: int) -> None:
    """A secret nested 60 or 100,000 levels deep is found (the walk does not recurse)."""
    assert REDACTOR.find(nested(depth)) == "API_KEY"


def test_a_cycle_is_walked_once() -> None:
    """A list that contains itself ends the walk: no secret, no hang."""
    loop: list[Any] = ["clean"]
    loop.append(loop)
    assert REDACTOR.find(loop) is None


def _noted() -> Exception:
    exc = RuntimeError("clean")
    exc.add_note(SECRET)
    return exc


def _caused() -> Exception:
    exc = RuntimeError("clean")
    exc.__cause__ = KeyError(SECRET)
    return exc


def _attribute() -> Exception:
    exc = RuntimeError("clean")
    exc.token = SECRET  # type: ignore[attr-defined]
    return exc


@pytest.mark.parametrize(
    "value",
    [
        _noted(),
        _caused(),
        _attribute(),
        ExceptionGroup("clean", [ValueError(SECRET)]),
        Holder({"deep": Holder(SECRET)}),
        Slotted(SECRET),
        {SECRET: "a key, not a value"},
        SECRET.encode(),
    ],
    ids=["notes", "cause", "attribute", "group", "object", "slots", "key", "bytes"],
)
def test_secrets_are_found_wherever_a_serializer_could_save_them(value: Any) -> None:
    """Notes, causes, attributes, sub-exceptions, object fields, slots, keys and bytes."""
    assert REDACTOR.find(value) == "API_KEY"


def test_a_suppressed_context_is_not_looked_at() -> None:
    """``raise X from None`` hides the context from every view, so it does not count."""
    try:
        try:
            raise KeyError(SECRET)
        except KeyError:
            raise RuntimeError("clean") from None
    except RuntimeError as exc:
        assert REDACTOR.find(exc) is None


def test_escaped_forms_of_a_secret_are_scrubbed() -> None:
    """A secret with a quote, a backslash and non-ASCII letters is replaced in JSON text (both
    ASCII-escaped and not) and in a printed dict."""
    quoted = 'Pä"ss\\wörd-1'
    redactor = Redactor({"PW": quoted})
    for text in (
        json.dumps({"k": quoted}),
        json.dumps([quoted], ensure_ascii=False),
        str([quoted]),
    ):
        assert redactor.scrub(text).count("[vault:PW]") == 1, text
        assert redactor.find_text(text) == "PW"


def test_a_secret_split_across_writes_is_scrubbed_at_every_cut() -> None:
    """Fed in two pieces cut anywhere, the stream out is the whole text scrubbed."""
    text = f"before {SECRET} after".encode()
    for cut in range(len(text) + 1):
        scrubber = StreamScrubber(REDACTOR)
        out = scrubber.feed(text[:cut]) + scrubber.feed(text[cut:]) + scrubber.close()
        assert out == b"before [vault:API_KEY] after", cut


def test_a_partial_secret_is_written_at_the_end() -> None:
    """The start of a secret that never completes is written when the stream ends."""
    scrubber = StreamScrubber(REDACTOR)
    assert scrubber.feed(b"x " + SECRET[:6].encode()) == b"x "
    assert scrubber.close() == SECRET[:6].encode()


def test_the_journal_refuses_an_entry_carrying_a_secret(tmp_path: Path) -> None:
    """An entry with a vault value is refused with secret-leak and never reaches the file."""
    journal = Journal(tmp_path / "journal.jsonl", REDACTOR)
    journal.intent("wf/1/1", {"kind": "agent", "name": "a"}, 1)
    with pytest.raises(SecretLeakError, match="API_KEY"):
        journal.result("wf/1/1", {"token": [[SECRET]]})
    assert SECRET not in (tmp_path / "journal.jsonl").read_text()
