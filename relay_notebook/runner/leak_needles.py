"""What the secret check looks for and what it found: every form of every secret (``Needles``)
and the places a secret was (``Leak``), each named by its vault name, never its value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agentworks.codes import SECRET_LEAK
from agentworks.redact import MIN_SECRET_LENGTH, secret_forms

__all__ = ["Leak", "Needles", "marker"]


def marker(name: str) -> str:
    return f"[vault:{name}]"


class Needles:
    """Every form of every secret, as bytes, longest first: found, and replaced by the marker."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        found: dict[bytes, tuple[str, str]] = {}
        self.values: list[tuple[str, str]] = []
        #: each value as it is and JSON-escaped (what a JSON text cut into strings joins up to)
        self.joined_forms: list[bytes] = []
        for name, value in secrets.items():
            if len(value) < MIN_SECRET_LENGTH:
                continue
            self.values.append((name, value))
            plain = secret_forms(value)
            self.joined_forms += [plain[k].encode() for k in ("as it is", "JSON-escaped")]
            forms = {k: v.encode() for k, v in secret_forms(value, encoded=True).items()}
            forms |= {
                "UTF-16-LE": value.encode("utf-16-le"),
                "UTF-16-BE": value.encode("utf-16-be"),
            }
            for form, data in forms.items():
                found.setdefault(data, (name, form))
        self._items = sorted(((d, *nf) for d, nf in found.items()), key=lambda i: -len(i[0]))
        self.longest = max((len(d) for d in found), default=0)

    def __bool__(self) -> bool:
        return bool(self._items)

    def find(self, data: bytes) -> tuple[str, str] | None:
        """``(name, form)`` of a secret whose form occurs in ``data``, else None."""
        return next(((n, f) for d, n, f in self._items if d in data), None)

    def scrub(self, data: bytes) -> bytes:
        for needle, name, _ in self._items:
            if needle in data:
                data = data.replace(needle, marker(name).encode())
        return data

    def scrub_text(self, text: str) -> str:
        return self.scrub(text.encode("utf-8", "surrogatepass")).decode("utf-8", "replace")

    def find_split(self, text: str) -> tuple[str, int, int] | None:
        """``(name, start, end)`` of a secret's plain value in ``text`` (strings joined)."""
        for name, value in self.values:
            start = text.find(value)
            if start >= 0:
                return name, start, start + len(value)
        return None


@dataclass
class Leak:
    """What the check found: the secrets by name and where each was (never a value)."""

    places: list[tuple[str, str, str]] = field(default_factory=list)  # (name, form, where)

    def add(self, found: tuple[str, str] | None, where: str) -> bool:
        if found is not None:
            self.places.append((*found, where))
        return found is not None

    def message(self, run_id: str, relay: str) -> str:
        name, form, _ = self.places[0]
        shown = "" if form == "as it is" else f" ({form})"
        wheres = list(dict.fromkeys(p[2] for p in self.places))
        where = ", ".join(wheres[:3])
        more = len(wheres) - 3
        others = f" and {more} other place{'s' if more != 1 else ''}" if more > 0 else ""
        names = sorted({p[0] for p in self.places} - {name})
        also = f" (and of {', '.join(names)})" if names else ""
        return (
            f"Run {run_id} saved the value of vault secret {name}{shown}{also} in {where}{others}"
            ". The supervisor's check failed the attempt and replaced every copy with "
            f"{marker(name)}. Pass the secret's name and read it with vault({name!r}) where "
            f"it is used; start a new run with: relay run {relay} [{SECRET_LEAK.code}]"
        )
