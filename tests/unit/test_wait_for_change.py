"""A look that lets the watches catch up leaves the change it saw for the loop that acts on it."""

from __future__ import annotations

import asyncio

from pathways_airflow.triggers.watch import Subscription, wait_for_change


def test_a_consuming_wait_rearms_and_a_peek_leaves_the_change_set():
    async def main() -> tuple[bool, bool, bool, bool]:
        workload, pods = Subscription(), Subscription()
        asyncio.get_running_loop().call_later(0.01, workload.changed.set)
        peeked = await wait_for_change([workload, pods], 5, consume=False)
        still_set = workload.changed.is_set()
        consumed = await wait_for_change([workload, pods], 5)  # returns at once: the change is still there
        quiet = await wait_for_change([workload, pods], 0.01)
        return peeked, still_set, consumed, quiet

    assert asyncio.run(main()) == (True, True, True, False)
