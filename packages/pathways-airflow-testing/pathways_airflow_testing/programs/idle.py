"""Stand-ins that do nothing but live: Pathways servers and sidecars, and a plain ``exit N``.

The Pathways resource manager, proxy and workers matter to the provider only as pods that are
running or not, so their containers idle until stopped. ``exit N`` is the smallest user program:
it lets a test make a container fail with a chosen code.
"""

from __future__ import annotations

import asyncio

from pathways_airflow_testing.programs.args import (
    BadArgument,
    command_tokens,
    describe,
    env_int,
    env_number,
    exit_code_in,
)
from pathways_airflow_testing.programs.base import ProgramContext


async def idle(ctx: ProgramContext) -> int:
    """Log one line, then run until the pod is stopped."""
    command = describe(ctx.argv) if ctx.argv else "(image entrypoint)"
    ctx.log(f"{ctx.container_name}: started, idling until stopped: {command}")
    await asyncio.Event().wait()
    return 0  # not reached: cancellation ends it


EXIT_WHEN_POLL_SECONDS = 0.5
"""How often (real seconds) a gated ``exit N`` looks for its object."""


async def exit_with_code(ctx: ProgramContext) -> int:
    """Exit with the code of ``exit N`` in the command, else ``$PATHWAYS_TESTING_EXIT_CODE`` (1).

    ``$PATHWAYS_TESTING_RUN_SECONDS`` (0) simulated seconds pass first; with
    ``$PATHWAYS_TESTING_EXIT_WHEN`` (a ``gs://`` object) it also runs until that object exists,
    so that a test ends many workloads at a moment of its choosing, whatever the clock's speed.
    """
    try:
        code = exit_code_in(command_tokens(ctx.argv, ctx.env))
        if code is None:
            code = env_int(ctx.env, "PATHWAYS_TESTING_EXIT_CODE", 1) or 0
        delay = env_number(ctx.env, "PATHWAYS_TESTING_RUN_SECONDS", 0.0)
        gate = ctx.env.get("PATHWAYS_TESTING_EXIT_WHEN", "")
        if gate and not gate.startswith("gs://"):
            raise BadArgument(f"PATHWAYS_TESTING_EXIT_WHEN={gate!r}: not a gs:// object")
    except BadArgument as error:
        ctx.log(f"error: {error}")
        return 1
    await ctx.clock.sleep(delay)
    if gate:
        ctx.log(f"{ctx.container_name}: running until {gate} exists")
        while not await ctx.gcs.exists(gate):
            await asyncio.sleep(EXIT_WHEN_POLL_SECONDS)
    ctx.log(f"{ctx.container_name}: exiting with code {code}")
    return code
