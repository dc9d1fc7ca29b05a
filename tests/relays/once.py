def shout(text):
    return text.upper()


async def run(INPUT, ctx):
    loud = await ctx.step("shout", shout, arguments={"text": INPUT.get("text", "hi")})
    return {"loud": loud}
