import errno

from dbos import DBOS


@DBOS.step()
async def write(path):
    try:
        with open(path, "w") as fh:
            fh.write("escaped")
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "written"


@DBOS.step()
async def after(x):
    return x


@DBOS.workflow()
async def run(INPUT):
    blocked = await write(INPUT["outside"])
    return {"outside": blocked, "after": await after(1)}
