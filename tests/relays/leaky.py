"""Leak attempts: INPUT["leak"] names a way to get a vault value saved or shown.

The value is LEAK_TOKEN's, or that of the secret INPUT["secret"] names.
"""

import asyncio
import logging
import os
from dataclasses import dataclass

from dbos import DBOS, SetWorkflowID, WorkflowSerializationFormat

from agentworks import agent, tool, vault

SECRET = ["LEAK_TOKEN"]  # set by run(); steps run in the same process


def token():
    return vault(SECRET[0])


class Carrier(Exception):
    """An error whose message is clean and whose attribute holds the secret."""

    def __init__(self, message):
        super().__init__(message)
        self.token = token()


def noted():
    exc = RuntimeError("clean message")
    exc.add_note("token " + token())
    return exc


def raise_caused():
    try:
        raise KeyError(token())
    except KeyError as exc:
        raise RuntimeError("clean message") from exc


def nested(depth):
    value = {"token": token()}
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
    raise ValueError("lookup failed with " + token())


@tool
def fetch_token(sku: str) -> dict:
    """Return the secret (to the model, and to the restart journal)."""
    return {"sku": sku, "token": token()}


def raise_as(how):
    """Raise with the secret out of the message, where ``how`` says: in an attribute, in the
    notes or in the cause; any other ``how`` returns."""
    if how == "attribute":
        raise Carrier("clean message")
    if how == "notes":
        raise noted()
    if how == "cause":
        raise_caused()


@DBOS.step()
async def fail_with(how):
    if how == "message":
        raise ValueError("bad token " + token())
    raise_as(how)
    if how == "group":
        raise ExceptionGroup("clean message", [KeyError(token())])
    return how


@DBOS.step()
async def deep_result():
    return nested(60)


@DBOS.step()
def sync_step_object():
    return {"token": Token(token())}


@DBOS.workflow()
def sync_child(how):
    if how == "raise":
        raise Carrier("clean message")
    return {"token": token()}


@DBOS.workflow()
async def quiet_child():
    return "ok"


@DBOS.workflow()
async def child(token):
    return len(token)


@DBOS.workflow()
async def run(INPUT):
    leak = INPUT["leak"]
    SECRET[0] = INPUT.get("secret", "LEAK_TOKEN")
    if leak.startswith("step-"):
        return await fail_with(leak[len("step-") :])
    if leak.startswith("workflow-"):
        raise_as(leak[len("workflow-") :])
    if leak == "child-input":
        return await child(token())
    if leak == "set-event":
        await DBOS.set_event_async("token", {"value": token()})
    if leak == "write-stream":
        await DBOS.write_stream_async("tokens", token())
    if leak == "send":
        await DBOS.send_async(DBOS.workflow_id, token(), topic="token")
    if leak == "set-event-portable":
        await DBOS.set_event_async(
            "token",
            {"value": token()},
            serialization_type=WorkflowSerializationFormat.PORTABLE,
        )
    if leak.startswith("sync-child-"):
        return await asyncio.to_thread(sync_child, leak[len("sync-child-") :])
    if leak == "object-step":
        return await asyncio.to_thread(sync_step_object)
    if leak == "child-id":
        with SetWorkflowID("child-" + token()):
            return await quiet_child()
    if leak == "event-key":
        await DBOS.set_event_async("key-" + token(), 1)
    if leak == "deep-step":
        return await deep_result()
    if leak == "deep-result":
        return nested(60)
    if leak == "print":
        print("token", token())
        logging.getLogger("relay").warning("token %s", token())
        DBOS.logger.warning("token %s", token())
    if leak == "fd-write":
        os.write(1, ("token " + token() + "\n").encode())
        os.write(2, ("token " + token() + "\n").encode())
    if leak == "fd-write-split":
        value = token().encode()
        os.write(2, b"token " + value[:5])
        os.write(2, value[5:] + b"\n")
    if leak == "crash":
        os.write(2, ("fatal: token " + token() + "\n").encode())
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
