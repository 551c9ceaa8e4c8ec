"""Run a trigger as the triggerer does: rebuilt from its ``serialize()`` read back as JSON (what
the database row holds), on a fresh event loop, to its first event or to ``on_kill``.

Reviving it is part of the test: a trigger whose arguments do not survive the round trip, or
that keeps state outside them, fails here as it would after a triggerer restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Callable

from airflow.sdk.module_loading import import_string

from pathways_airflow.hooks.pathways import AsyncPathwaysHook


def revive(trigger: Any) -> Any:
    """A new trigger built from ``trigger.serialize()`` after a JSON round trip."""
    path, kwargs = trigger.serialize()
    return import_string(path)(**json.loads(json.dumps(kwargs)))


def first_event(
    trigger: Any,
    timeout: float = 60.0,
    *,
    during: Callable[[], None] | None = None,
    during_after: float = 0.5,
) -> dict[str, Any]:
    """The payload of the first event of ``trigger`` revived from its serialized form.

    ``during`` runs in a thread ``during_after`` seconds after the trigger started, while it
    waits (to break the cluster under it, or to kill what it watches).
    """
    revived = revive(trigger)

    async def main() -> dict[str, Any]:
        events = revived.run()
        waiting = asyncio.ensure_future(events.__anext__())
        try:
            if during is not None:
                await asyncio.sleep(during_after)
                await asyncio.to_thread(during)
            return (await asyncio.wait_for(waiting, timeout)).payload
        finally:
            await _cancel(waiting)
            await events.aclose()
            await AsyncPathwaysHook.close_all()

    return asyncio.run(main())


def killed_after(trigger: Any, seconds: float) -> None:
    """Run ``trigger`` revived for ``seconds``, then cancel it and call its ``on_kill`` (as when
    the task is killed while deferred)."""
    revived = revive(trigger)

    async def main() -> None:
        events = revived.run()
        waiting = asyncio.ensure_future(events.__anext__())
        try:
            await asyncio.sleep(seconds)
            await _cancel(waiting)
            await revived.on_kill()
        finally:
            await _cancel(waiting)
            await events.aclose()
            await AsyncPathwaysHook.close_all()

    asyncio.run(main())


async def _cancel(waiting: asyncio.Future) -> None:
    """Cancel a pending wait for the next event and let it finish, so the generator can close."""
    if not waiting.done():
        waiting.cancel()
        try:
            await waiting
        except (asyncio.CancelledError, Exception):  # its outcome is no longer wanted
            pass


def cancelled_like_a_triggerer(trigger: Any, after: float = 2.0, *, close_clients: bool = True) -> None:
    """Run ``trigger`` for ``after`` seconds, then cancel it and run its ``cleanup()`` as a
    triggerer does (``run_trigger``: cancel, then clean up). ``close_clients=False`` leaves the
    async clients to close themselves, for tests that check they do."""

    async def run_trigger() -> None:
        try:
            async for _ in trigger.run():
                pass
        finally:
            await trigger.cleanup()

    async def main() -> None:
        task = asyncio.create_task(run_trigger())
        await asyncio.sleep(after)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if close_clients:
            await AsyncPathwaysHook.close_all()

    asyncio.run(main())
