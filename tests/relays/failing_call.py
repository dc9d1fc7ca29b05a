from dbos import DBOS

from agentworks import agent, tool


@tool
def ping() -> str:
    """Ping."""
    return "pong"


@DBOS.step()
async def prepare(order):
    return {"order": order}


@DBOS.workflow()
async def run(INPUT):
    prepared = await prepare(INPUT)
    return await agent(name="looper", user_message=str(prepared), tools=[ping], max_turns=1)
