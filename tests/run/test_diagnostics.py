import asyncio

from eventq.run.diagnostics import await_chain


def test_await_chain_names_every_coroutine_a_task_waits_in():
    async def inner(event):
        await event.wait()

    async def outer(event):
        await inner(event)

    async def scenario():
        event = asyncio.Event()
        task = asyncio.create_task(outer(event))
        await asyncio.sleep(0)
        chain = await_chain(task.get_coro())
        event.set()
        await task
        return chain

    chain = asyncio.run(scenario())
    names = [where.rsplit(" ", 1)[1] for where in chain]
    assert names[:3] == ["outer", "inner", "wait"]
