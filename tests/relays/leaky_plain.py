"""A relay_durability: none program (no DBOS) whose result carries the vault value LEAK_TOKEN."""


async def run(INPUT, ctx):
    return {"token": ctx.vault("LEAK_TOKEN"), "leak": INPUT["leak"]}
