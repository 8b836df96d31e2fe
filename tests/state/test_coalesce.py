"""One expensive computation at a time, each caller served by one that began after it
asked (`inspect digest`: docs/architecture.md, "Hostile inputs")."""

from __future__ import annotations

import asyncio

from eventq.state.coalesce import Coalesced


def test_many_callers_share_runs_that_began_after_they_asked():
    async def scenario():
        state = {"value": 0, "running": 0, "most": 0}

        async def compute() -> int:
            state["running"] += 1
            state["most"] = max(state["most"], state["running"])
            seen = state["value"]
            await asyncio.sleep(0.01)
            state["running"] -= 1
            return seen

        digest = Coalesced(compute)
        first = asyncio.create_task(digest())
        await asyncio.sleep(0.001)  # the first run is under way
        state["value"] = 1  # a write the next callers must see
        later = [asyncio.create_task(digest()) for _ in range(100)]
        assert await first == 0
        assert await asyncio.gather(*later) == [1] * 100
        assert digest.runs == 2 and state["most"] == 1

    asyncio.run(scenario())


def test_a_failed_run_fails_its_callers_and_the_next_run_still_happens():
    async def scenario():
        calls = []

        async def compute() -> str:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("store went away")
            return "ok"

        digest = Coalesced(compute)
        try:
            await digest()
        except RuntimeError:
            pass
        else:
            raise AssertionError("the failure was not passed on")
        assert await digest() == "ok"

    asyncio.run(scenario())
