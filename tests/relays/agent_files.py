
import os
from pathlib import Path
from dbos import DBOS
from agentworks import agent, tool


@tool
def save_note(name: str, text: str) -> dict:
    """Write a note into the run's execution folder (the child's working directory)."""
    Path(name).write_text(text)
    return {"saved": name}


@tool
def check(name: str) -> dict:
    """Check a note; the first time, the child dies in the middle of the call."""
    if not Path("checked-once").exists():
        Path("checked-once").write_text("x")
        os._exit(9)
    return {"ok": Path(name).read_text() == "hello"}


@DBOS.workflow()
async def run(INPUT):
    await agent(name="writer", user_message="write", tools=[save_note], replay_safe=True)
    return await agent(name="checker", user_message="check", tools=[check], replay_safe=True)
