from dbos import DBOS

from agentworks import AgentError, agent, tool


@tool
def ping() -> str:
    """Ping."""
    return "pong"


@DBOS.step()
async def prepare(order):
    return {"order": order}


@DBOS.step()
async def finish(answer):
    return {"answer": answer}


@DBOS.workflow()
async def run(INPUT):
    prepared = await prepare(INPUT)
    try:
        answer = await agent(name="looper", user_message=str(prepared), tools=[ping], max_turns=1)
    except AgentError as exc:
        answer = f"no answer: {exc}"
    return await finish(answer)
