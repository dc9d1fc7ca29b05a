
import os
from dbos import DBOS

def note(ledger, line):
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, (line + "\n").encode())
    os.close(fd)

@DBOS.step()
async def load(ledger, n):
    note(ledger, "load")
    return list(range(n))

@DBOS.step()
async def square(ledger, x):
    note(ledger, f"square {x}")
    return x * x

@DBOS.step()
def total(ledger, values):
    note(ledger, "total")
    return sum(values)

@DBOS.workflow()
async def run(INPUT):
    ledger = INPUT["ledger"]
    items = await load(ledger, INPUT["n"])
    squares = []
    for x in items:
        squares.append(await square(ledger, x))
    return {"squares": squares, "total": total(ledger, squares)}
