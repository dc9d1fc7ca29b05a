from dbos import DBOS


class Receipt:
    def __init__(self, n):
        self.n = n


@DBOS.workflow()
async def run(INPUT):
    await DBOS.set_event_async("secret", {"token": INPUT["token"]})
    await DBOS.set_event_async("numbers", frozenset({7}))
    await DBOS.set_event_async("receipt", Receipt(3))
    await DBOS.write_stream_async("log", f"token is {INPUT['token']}")
    return {"ok": True}
