"""The JetStream (MaxEngine on Pathways) server stand-in: a real HTTP server on loopback.

What a serving pipeline has to get right is the start-up: the server refuses a checkpoint that is
not committed, then takes minutes to load before it can answer. So:

1. ``load_parameters_path`` (if given) must name a committed step (``<step>/items`` whose
   ``<step>/commit_success.txt`` exists); otherwise the server logs the error and exits 1.
2. It listens on ``127.0.0.1`` on a free port, published as container port 8000 (JetStream's
   ``jetstream-http``) and 9000 (JetStream's gRPC port, spoken here as the same HTTP).
3. ``GET /healthcheck`` answers 500 for ``PATHWAYS_TESTING_WARMUP_SECONDS`` (60) simulated
   seconds, then 200.
4. ``POST /generate`` with ``{"prompt": str, "max_tokens": int}`` answers ``{"response": str}``
   of ``max_tokens`` words. Latency is *real* time, not simulated, so a benchmark measures
   something: the response headers come after ``PATHWAYS_TESTING_TTFT_MS`` (50) ms, then each
   word is streamed ``PATHWAYS_TESTING_TPOT_MS`` (5) ms apart. Keep them small in tests.

It serves until the pod is stopped, then closes the listening socket.
"""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass
from typing import Mapping

from aiohttp import web

from pathways_airflow.checkpoints import is_gcs, step_dir_of
from pathways_airflow_testing.programs.args import BadArgument, command_tokens, env_number, parse_params
from pathways_airflow_testing.programs.base import ProgramContext
from pathways_airflow_testing.programs.training import is_committed

HTTP_PORT = 8000
GRPC_PORT = 9000
DEFAULT_MAX_TOKENS = 64


@dataclass(frozen=True)
class ServerPlan:
    load_parameters_path: str | None
    model_name: str
    warmup_seconds: float
    ttft_ms: float
    tpot_ms: float

    @classmethod
    def from_command(cls, argv: list[str], env: Mapping[str, str]) -> ServerPlan:
        params = parse_params(command_tokens(argv, env))
        path = params.text("load_parameters_path") or None
        if path is not None and not is_gcs(path):
            raise BadArgument(f"load_parameters_path={path!r}: only gs:// paths are emulated")
        plan = cls(
            load_parameters_path=path.rstrip("/") if path else None,
            model_name=params.text("model_name") or params.text("model") or "unknown",
            warmup_seconds=env_number(env, "PATHWAYS_TESTING_WARMUP_SECONDS", 60.0),
            ttft_ms=env_number(env, "PATHWAYS_TESTING_TTFT_MS", 50.0),
            tpot_ms=env_number(env, "PATHWAYS_TESTING_TPOT_MS", 5.0),
        )
        latencies = {"PATHWAYS_TESTING_TTFT_MS": plan.ttft_ms, "PATHWAYS_TESTING_TPOT_MS": plan.tpot_ms}
        for name, value in latencies.items():
            if value < 0:
                raise BadArgument(f"{name}={value}: must be >= 0")
        return plan


def generated_words(prompt: str, max_tokens: int) -> list[str]:
    """The reply: the prompt's words over and over, ``max_tokens`` of them."""
    source = prompt.split() or ["token"]
    return [source[i % len(source)] for i in range(max_tokens)]


class _Server:
    """The HTTP routes, with the warm-up state they answer from."""

    def __init__(self, plan: ServerPlan):
        self.plan = plan
        self.ready = False

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthcheck", self.healthcheck)
        app.router.add_post("/generate", self.generate)
        return app

    async def healthcheck(self, request: web.Request) -> web.Response:
        if not self.ready:
            return web.json_response({"response": "server is loading"}, status=500)
        return web.json_response({"response": "Healthy"}, status=200)

    async def generate(self, request: web.Request) -> web.StreamResponse:
        if not self.ready:
            return web.json_response({"error": "server is not ready"}, status=503)
        try:
            body = await request.json()
            prompt = body["prompt"]
            max_tokens = int(body.get("max_tokens", DEFAULT_MAX_TOKENS))
            if not isinstance(prompt, str) or max_tokens < 0:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return web.json_response(
                {"error": 'expected JSON {"prompt": str, "max_tokens": int >= 0}'}, status=400
            )
        await asyncio.sleep(self.plan.ttft_ms / 1000)
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b'{"response": "')
        for index, word in enumerate(generated_words(prompt, max_tokens)):
            if index:
                await asyncio.sleep(self.plan.tpot_ms / 1000)
            piece = word if index == 0 else f" {word}"
            await response.write(json.dumps(piece)[1:-1].encode())
        await response.write(b'"}')
        await response.write_eof()
        return response


async def run(ctx: ProgramContext) -> int:
    try:
        plan = ServerPlan.from_command(ctx.argv, ctx.env)
    except BadArgument as error:
        ctx.log(f"error: {error}")
        return 1

    if plan.load_parameters_path is not None:
        step_dir = step_dir_of(plan.load_parameters_path)
        if not await is_committed(ctx.gcs, step_dir):
            ctx.log(
                f"error: Found incomplete checkpoint at {step_dir}: no commit_success.txt; "
                f"cannot load load_parameters_path={plan.load_parameters_path}"
            )
            return 1
        ctx.log(f"loading parameters from {plan.load_parameters_path}")
    else:
        ctx.log("no load_parameters_path: serving randomly initialised parameters")

    server = _Server(plan)
    runner = web.AppRunner(server.application(), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        await web.SockSite(runner, sock).start()
        ctx.publish_port(HTTP_PORT, port)
        ctx.publish_port(GRPC_PORT, port)
        ctx.log(f"listening on ports {HTTP_PORT} and {GRPC_PORT}; loading model {plan.model_name}")
        await ctx.clock.sleep(plan.warmup_seconds)
        server.ready = True
        ctx.log(f"server is ready: model {plan.model_name} loaded")
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
    return 0  # not reached: the server runs until cancelled
