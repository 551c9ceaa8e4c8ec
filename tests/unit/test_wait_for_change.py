"""A wait for a change returns at the first one, re-armed for the next; a timeout is no change."""

from __future__ import annotations

import asyncio

from pathways_airflow.triggers.watch import Subscription, wait_for_change


def test_a_wait_returns_at_a_change_and_rearms_for_the_next():
    async def main() -> tuple[bool, bool, bool]:
        workload, pods = Subscription(), Subscription()
        asyncio.get_running_loop().call_later(0.01, workload.changed.set)
        woken = await wait_for_change([workload, pods], 5)
        rearmed = not workload.changed.is_set()
        quiet = await wait_for_change([workload, pods], 0.01)
        return woken, rearmed, quiet

    assert asyncio.run(main()) == (True, True, False)


def test_subscriptions_sharing_one_event_wait_on_it_alone_with_the_same_answers():
    async def main() -> tuple[bool, bool, bool, int]:
        shared = asyncio.Event()
        workload, pods = Subscription(changed=shared), Subscription(changed=shared)
        before, during = len(asyncio.all_tasks()), []
        asyncio.get_running_loop().call_later(0.005, lambda: during.append(len(asyncio.all_tasks())))
        asyncio.get_running_loop().call_later(0.01, pods.changed.set)
        woken = await wait_for_change([workload, pods], 5)
        tasks_while_waiting = during[0] - before
        quiet = await wait_for_change([workload, pods], 0.01)
        return woken, workload.changed.is_set(), quiet, tasks_while_waiting

    assert asyncio.run(main()) == (True, False, False, 0)


def test_a_wait_on_a_change_already_there_still_gives_the_loop_a_turn():
    async def main() -> list[str]:
        order: list[str] = []
        shared = asyncio.Event()
        shared.set()

        async def other() -> None:
            order.append("other")

        asyncio.get_running_loop().create_task(other())
        await wait_for_change([Subscription(changed=shared)], 5)
        order.append("waited")
        return order

    assert asyncio.run(main()) == ["other", "waited"]


def test_rechecks_are_spread_never_later_than_asked():
    from pathways_airflow.triggers.watch import RECHECK_SPREAD, spread

    waits = [spread(60.0) for _ in range(2000)]
    assert all(60.0 * (1 - RECHECK_SPREAD) <= w <= 60.0 for w in waits)
    # Spread over the whole range: 10,000 waits started together no longer fire in one instant.
    assert max(waits) - min(waits) > 60.0 * RECHECK_SPREAD * 0.9
