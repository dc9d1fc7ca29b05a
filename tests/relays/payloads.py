"""Carries large values through DBOS: its INPUT, a step output, a message and an event.

It returns their sizes and digests, never the values (a result is capped at 128 KiB).
"""

import hashlib
import json

from dbos import DBOS


def digest(value):
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@DBOS.step()
async def fetch(INPUT):
    return INPUT.get("fetched", "small")


@DBOS.step()
async def finish(fetched, message):
    return {"fetched": digest(fetched), "message": digest(message)}


@DBOS.workflow()
async def run(INPUT):
    fetched = await fetch(INPUT)
    message = await DBOS.recv_async("payload", timeout_seconds=3600)
    await DBOS.set_event_async("echo", message)
    done = await finish(fetched, message)
    return {"input": digest(INPUT), **done}
