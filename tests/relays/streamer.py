from dbos import DBOS


@DBOS.step()
def token(i):
    return f"part {i}"


@DBOS.workflow()
async def run(INPUT):
    parts = []
    for i in range(INPUT.get("parts", 3)):
        part = token(i)
        await DBOS.write_stream_async("output", part)
        await DBOS.set_event_async("progress", {"done": i + 1})
        parts.append(part)
        await DBOS.sleep_async(INPUT.get("pause", 0.2))
    await DBOS.close_stream_async("output")
    return {"parts": parts}
