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


def test_where_it_hangs_names_the_threads_and_the_main_loops_waiting_tasks(tmp_path):
    """What the stop watchdog prints as it gives up: every thread's stack, and each task
    of the main loop with the coroutines it waits in (read from another thread)."""
    import threading

    from eventq.run.diagnostics import print_where_it_hangs

    async def stuck_in_a_flush(event):
        await event.wait()

    async def scenario():
        event = asyncio.Event()
        task = asyncio.create_task(stuck_in_a_flush(event), name="the-flush")
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        with open(tmp_path / "said", "w") as file:
            thread = threading.Thread(target=print_where_it_hangs, args=(file, loop))
            thread.start()
            await asyncio.to_thread(thread.join)
        event.set()
        await task

    asyncio.run(scenario())
    said = (tmp_path / "said").read_text()
    assert "Current thread" in said or "Thread 0x" in said  # faulthandler's stacks
    assert "the-flush" in said and "stuck_in_a_flush" in said
