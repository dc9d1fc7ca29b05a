from dbos import DBOS
from agentworks import agent

@DBOS.step(name="extract_invoice")
async def extract_invoice(text):
    return await agent(name="extract", system_prompt="Extract invoice fields as JSON.",
                       user_message=text, output_schema={"type": "object"})

@DBOS.step()
async def review(invoice):
    return await agent(name="review", system_prompt="Review a large invoice; return it as JSON.",
                       user_message=str(invoice), output_schema={"type": "object"})

@DBOS.workflow(max_recovery_attempts=3)
async def run(INPUT):
    invoice = await extract_invoice(INPUT["text"])
    if invoice["amount"] > 1000:
        invoice = await review(invoice)
    return {"invoice": invoice}
