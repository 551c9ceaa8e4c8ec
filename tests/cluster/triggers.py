"""Run a trigger as the triggerer does: rebuilt from its ``serialize()`` read back as JSON (what
the database row holds), on a fresh event loop, to its first event."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from airflow.sdk.module_loading import import_string

from pathways_airflow.hooks.pathways import AsyncPathwaysHook


def first_event(trigger: Any, timeout: float = 60.0) -> dict[str, Any]:
    """The payload of the first event of ``trigger`` revived from its serialized form."""
    path, kwargs = trigger.serialize()
    revived = import_string(path)(**json.loads(json.dumps(kwargs)))

    async def main() -> dict[str, Any]:
        events = revived.run()
        try:
            return (await asyncio.wait_for(events.__anext__(), timeout)).payload
        finally:
            await events.aclose()
            await AsyncPathwaysHook.close_all()

    return asyncio.run(main())
