"""Hints worded for the surface the user is on, and durations as active time."""

from __future__ import annotations

import pytest

from relay_notebook import commands
from relay_notebook.views.wording import (
    Surface,
    access_line,
    duration_text,
    published_line,
    releases_lines,
    reword,
    verify_lines,
)
from relay_notebook.workspace import Workspace
from tests.relays import relay_source

MESSAGE = (
    "Run nap-3 was interrupted. Recover it with: relay recover nap-3. No run 'x-1'. List runs "
    "with: relay runs nap; then 'relay reconcile nap-3 --result JSON' or 'relay reconcile "
    "nap-3 --retry'. Create it with a '%%relay nap' cell or 'relay check path/to/nap.py'."
)


@pytest.mark.parametrize(
    ("surface", "shown", "absent"),
    [
        pytest.param(
            "notebook",
            [
                "Recover it with: %relay recover nap-3.",
                "List runs with: %relay runs nap;",
                "'%relay reconcile nap-3 --result JSON'",
                "a '%%relay nap' cell or '%relay check path/to/nap.py'",
            ],
            [" relay recover", " relay runs"],
            id="notebook-magics",
        ),
        pytest.param(
            "api",
            [
                "Recover it with: POST relay/api/runs/nap-3/recover.",
                "List runs with: GET relay/api/runs?relay=nap;",
                "'POST relay/api/runs/nap-3/reconcile {\"result\": JSON}'",
                "'POST relay/api/runs/nap-3/reconcile {\"retry\": true}'",
                "'relay check path/to/nap.py'",  # no route for a file path: left as is
            ],
            [],
            id="api-routes",
        ),
    ],
)
def test_each_surface_gets_hints_in_its_own_words(
    surface: Surface, shown: list[str], absent: list[str]
) -> None:
    """In a notebook every `relay COMMAND` hint becomes `%relay COMMAND` (`%%relay` and paths
    kept); a REST reply names the route that does what the hint says."""
    text = reword(MESSAGE, surface)
    assert [s for s in shown if s not in text] == [], text
    assert [s for s in absent if s in text] == [], text


def test_time_travel_and_waiting_hints_become_magics_too() -> None:
    """fork, lineage, diff, send, wait and wake hints are magics in a notebook as well."""
    text = reword(
        "Fork from it with: relay fork nap-3 --from nap#1; see relay lineage nap-3, relay diff "
        "nap-3 nap-4; answer with relay send nap-5 approval JSON or relay wait nap-5",
        "notebook",
    )
    assert text == (
        "Fork from it with: %relay fork nap-3 --from nap#1; see %relay lineage nap-3, %relay "
        "diff nap-3 nap-4; answer with %relay send nap-5 approval JSON or %relay wait nap-5"
    )


def test_the_api_gets_the_routes_of_deletes() -> None:
    """A delete hint names the DELETE route, with ``force`` where the hint forces."""
    assert reword("delete it with relay delete nap-3", "api").endswith(
        "DELETE relay/api/runs/nap-3"
    )
    assert reword("or relay delete nap --force", "api").endswith(
        "DELETE relay/api/relays/nap?force=true"
    )


def test_the_terminal_keeps_the_text() -> None:
    """The lower layers already word hints for a terminal."""
    assert reword(MESSAGE, "terminal") == MESSAGE


@pytest.mark.parametrize(
    ("active", "wall", "attempts", "shown"),
    [
        (1000.0, 30900.0, 2, "1.0 s (30.9 s wall)"),
        (1000.0, 1020.0, 2, "1.0 s (1.0 s wall)"),
        (1000.0, 1300.0, 1, "1.0 s"),
        (None, None, 1, "-"),
        (None, 500.0, 1, "0.5 s"),
    ],
)
def test_durations_are_active_time_with_the_wall_time_beside(
    active: float | None, wall: float | None, attempts: int, shown: str
) -> None:
    """A run of several attempts shows its active time first, its wall time beside; whether
    the wall time shows depends on the run, not on timing."""
    assert duration_text(active, wall, attempts) == shown


def test_command_results_render_once_per_surface(workspace: Workspace) -> None:
    """Publish, releases and verify read the same everywhere; the notebook's lines hold no
    clock times (saved outputs are compared by nbval), the terminal's add dates and counts."""
    workspace.save_draft("nap", relay_source("nap"))
    first = commands.publish(workspace, "nap")
    again = commands.publish(workspace, "nap")
    ref = f"v1 ({first.release.short_hash})"
    assert published_line(first, "notebook") == f"nap: published {ref}"
    assert published_line(again, "notebook") == f"nap: unchanged; already published as {ref}"
    assert published_line(first, "terminal") == f"nap: published {ref}, 2 files"
    found = commands.releases(workspace, "nap")
    assert releases_lines("nap", found, "notebook") == [
        f"nap v1    {first.release.short_hash}  2 files"
    ]
    assert first.release.created_at in releases_lines("nap", found, "terminal")[0]
    assert releases_lines("x", [], "notebook") == [
        "x: no releases yet (publish with: %relay publish x)"
    ]
    reports = commands.verify(workspace, "nap")
    assert verify_lines(reports, "notebook") == [f"nap {ref}: ok"]
    assert verify_lines(reports, "terminal") == [f"nap {ref}: ok, 2 files match"]
    assert access_line("nap", False, "notebook").endswith("(restore with: %relay grant nap)")
    assert access_line("nap", False, "terminal").endswith("(restore with: relay grant nap)")
