"""Leak attempts: INPUT["leak"] names a way to get the vault value LEAK_TOKEN saved or shown."""

import asyncio
import logging
import os
from dataclasses import dataclass

from dbos import DBOS, SetWorkflowID, WorkflowSerializationFormat

from agentworks import agent, tool, vault


class Carrier(Exception):
    """An error whose message is clean and whose attribute holds the secret."""

    def __init__(self, message):
        super().__init__(message)
        self.token = vault("LEAK_TOKEN")


def noted():
    exc = RuntimeError("clean message")
    exc.add_note("token " + vault("LEAK_TOKEN"))
    return exc


def raise_caused():
    try:
        raise KeyError(vault("LEAK_TOKEN"))
    except KeyError as exc:
        raise RuntimeError("clean message") from exc


def nested(depth):
    value = {"token": vault("LEAK_TOKEN")}
    for _ in range(depth):
        value = [value]
    return value


@dataclass
class Token:
    """A value object holding the secret (its repr shows it; pickle saves it)."""

    value: str


@tool
def lookup(sku: str) -> dict:
    """Look a product up (raises with the secret in its message)."""
    raise ValueError("lookup failed with " + vault("LEAK_TOKEN"))


@tool
def fetch_token(sku: str) -> dict:
    """Return the secret (to the model, and to the restart journal)."""
    return {"sku": sku, "token": vault("LEAK_TOKEN")}


@DBOS.step()
async def fail_with(how):
    if how == "message":
        raise ValueError("bad token " + vault("LEAK_TOKEN"))
    if how == "attribute":
        raise Carrier("clean message")
    if how == "notes":
        raise noted()
    if how == "cause":
        raise_caused()
    if how == "group":
        raise ExceptionGroup("clean message", [KeyError(vault("LEAK_TOKEN"))])
    return how


@DBOS.step()
async def deep_result():
    return nested(60)


@DBOS.step()
def sync_step_object():
    return {"token": Token(vault("LEAK_TOKEN"))}


@DBOS.workflow()
def sync_child(how):
    if how == "raise":
        raise Carrier("clean message")
    return {"token": vault("LEAK_TOKEN")}


@DBOS.workflow()
async def quiet_child():
    return "ok"


@DBOS.workflow()
async def child(token):
    return len(token)


@DBOS.workflow()
async def run(INPUT):
    leak = INPUT["leak"]
    if leak.startswith("step-"):
        return await fail_with(leak[len("step-") :])
    if leak == "workflow-attribute":
        raise Carrier("clean message")
    if leak == "workflow-notes":
        raise noted()
    if leak == "workflow-cause":
        raise_caused()
    if leak == "child-input":
        return await child(vault("LEAK_TOKEN"))
    if leak == "set-event":
        await DBOS.set_event_async("token", {"value": vault("LEAK_TOKEN")})
    if leak == "write-stream":
        await DBOS.write_stream_async("tokens", vault("LEAK_TOKEN"))
    if leak == "send":
        await DBOS.send_async(DBOS.workflow_id, vault("LEAK_TOKEN"), topic="token")
    if leak == "set-event-portable":
        await DBOS.set_event_async(
            "token",
            {"value": vault("LEAK_TOKEN")},
            serialization_type=WorkflowSerializationFormat.PORTABLE,
        )
    if leak.startswith("sync-child-"):
        return await asyncio.to_thread(sync_child, leak[len("sync-child-") :])
    if leak == "object-step":
        return await asyncio.to_thread(sync_step_object)
    if leak == "child-id":
        with SetWorkflowID("child-" + vault("LEAK_TOKEN")):
            return await quiet_child()
    if leak == "event-key":
        await DBOS.set_event_async("key-" + vault("LEAK_TOKEN"), 1)
    if leak == "deep-step":
        return await deep_result()
    if leak == "deep-result":
        return nested(60)
    if leak == "print":
        print("token", vault("LEAK_TOKEN"))
        logging.getLogger("relay").warning("token %s", vault("LEAK_TOKEN"))
        DBOS.logger.warning("token %s", vault("LEAK_TOKEN"))
    if leak == "fd-write":
        os.write(1, ("token " + vault("LEAK_TOKEN") + "\n").encode())
        os.write(2, ("token " + vault("LEAK_TOKEN") + "\n").encode())
    if leak == "fd-write-split":
        token = vault("LEAK_TOKEN").encode()
        os.write(2, b"token " + token[:5])
        os.write(2, token[5:] + b"\n")
    if leak == "crash":
        os.write(2, ("fatal: token " + vault("LEAK_TOKEN") + "\n").encode())
        os._exit(7)
    if leak == "tool-error":
        return await agent(name="looker", user_message="look up A", tools=[lookup])
    if leak == "journal":
        return await agent(
            name="fetcher", user_message="fetch A", tools=[fetch_token], recovery="restart"
        )
    if leak == "restart-tool-error":
        return await agent(
            name="looker", user_message="look up A", tools=[lookup], recovery="restart"
        )
    return "done"
