"""What a hung server prints: on SIGUSR1, beyond mode's main-loop tasks; and when its
stop watchdog gives up, where every thread and task was."""

from __future__ import annotations

import asyncio
import faulthandler
import threading
import traceback
from typing import IO


def print_thread_loop_tasks(file: IO[str]) -> None:
    for thread in threading.enumerate():
        service = getattr(thread, "service", None)  # mode's ServiceThread
        loop = getattr(service, "thread_loop", None)
        if loop is None:
            continue
        print(f"TASKS OF THREAD {thread.name} ({service!r})", file=file)
        for task in list(asyncio.all_tasks(loop)):
            print(f"  {task.get_name()}", file=file)
            for where in await_chain(task.get_coro()):
                print(f"    {where}", file=file)
        client = getattr(getattr(service, "_consumer", None), "_client", None)
        sync_task = getattr(client, "_sync_task", None)
        print(f"  consumer metadata task: {sync_task!r}", file=file)
        if sync_task is not None and sync_task.done() and not sync_task.cancelled():
            error = sync_task.exception()
            if error is not None:
                traceback.print_exception(error, file=file)
    file.flush()


def await_chain(coro: object) -> list[str]:
    """file:line of every coroutine a task is suspended in, outermost first
    (Task.print_stack shows only the outermost)."""
    chain = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        chain.append(f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return chain


def print_where_it_hangs(file: IO[str], loop: asyncio.AbstractEventLoop | None) -> None:
    """Every thread's Python stack, then the tasks of ``loop`` (the main loop) and of
    faust's service threads with the coroutines each is suspended in: what a stop that
    never ended was waiting for. Called from another thread as the process gives up."""
    faulthandler.dump_traceback(file=file, all_threads=True)
    if loop is not None:
        print("TASKS OF THE MAIN LOOP", file=file)
        for _ in range(3):  # the set of tasks may change under our feet: read it again
            try:
                tasks = list(asyncio.all_tasks(loop))
                break
            except RuntimeError:
                tasks = []
        for task in tasks:
            print(f"  {task.get_name()}", file=file)
            for where in await_chain(task.get_coro()):
                print(f"    {where}", file=file)
    print_thread_loop_tasks(file)
