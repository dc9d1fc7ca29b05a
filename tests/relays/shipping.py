"""A relay for forks: four steps, each appending to a side-effect file, the third refusing
big totals (tutorial 10 fixes it and forks the failed run from there)."""

from pathlib import Path

from dbos import DBOS

from agentworks import run_dir

LIMIT = 10


def _note(what: str) -> None:
    with open(Path(run_dir) / "effects.txt", "a", encoding="utf-8") as fh:
        fh.write(what + "\n")


@DBOS.step()
async def fetch(n):
    _note("fetch")
    return n


@DBOS.step()
async def price(n):
    _note("price")
    return n * 2


@DBOS.step()
async def check(total):
    _note("check")
    if total > LIMIT:
        raise ValueError(f"total {total} is over the limit of {LIMIT}")
    return total


@DBOS.step()
async def ship(total):
    _note("ship")
    return {"shipped": total}


@DBOS.workflow()
async def run(INPUT):
    n = await fetch(INPUT["n"])
    total = await price(n)
    total = await check(total)
    return await ship(total)
