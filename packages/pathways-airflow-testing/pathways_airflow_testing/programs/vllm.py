"""The ``vllm serve`` stand-in (vLLM on TPU): vLLM's OpenAI-compatible API on loopback.

What a serving pipeline has to get right with vLLM differs from JetStream in one way that matters:
nothing listens while the engine loads. Health checks and benchmarks get connection errors (the
Service answers 502/503) until the API server starts, then ``GET /health`` answers 200. So:

1. The command line is read as ``vllm serve MODEL`` would read it (also
   ``python3 -m vllm.entrypoints.cli.main serve MODEL`` and the older
   ``python3 -m vllm.entrypoints.openai.api_server --model MODEL``):

   * ``MODEL`` (positional, else ``--model``, else ``Qwen/Qwen3-0.6B`` as vLLM defaults): the
     Hugging Face id; the API serves it as ``--served-model-name`` if given, else as ``MODEL``.
   * ``--port`` (8000) is the container port published; ``--host``, ``--tensor-parallel-size``
     are only logged; every other flag is ignored.
   * ``--hf-overrides JSON`` must be a JSON object; its ``architectures``, if set, a list of names.
   * ``--additional-config JSON`` must be a JSON object. Its ``maxtext_config``
     (``{"model_name": ..., "load_parameters_path": "gs://..."}``) is MaxText's vLLM plugin,
     read only with ``--hf-overrides '{"architectures": ["MaxTextForCausalLM"]}'``: either one
     without the other is refused, since the real server would serve ``MODEL``'s Hugging Face
     weights instead of the checkpoint, or fail to build the MaxText model.
   * ``load_parameters_path`` must name a committed Orbax step (``<step>/commit_success.txt``),
     as for JetStream; otherwise the server logs the error and exits 1.

   Bad JSON or a bad value is logged as ``error: argument --FLAG: ...`` and exits 1.
2. It waits ``PATHWAYS_TESTING_WARMUP_SECONDS`` (60) simulated seconds "loading weights", *not
   listening*, then listens on ``127.0.0.1`` on a free port published as container port ``--port``.
3. Routes, in vLLM's formats (``vllm/entrypoints/openai``): ``GET /health`` → 200, empty body;
   ``GET /v1/models`` → the model list; ``POST /v1/completions`` → a ``text_completion``, or with
   ``"stream": true`` server-sent events, one ``data: {chunk}`` per token, a usage chunk if
   ``stream_options.include_usage``, then ``data: [DONE]``. A token is a word: the reply is the
   prompt's words over and over, ``max_tokens`` (16) of them, always ending for ``"length"``.
   Errors are vLLM's ``{"error": {"message", "type", "param", "code"}}``: 404 for an unknown
   model, 400 for a bad body.

Environment (latency is *real* time, so a benchmark measures something; keep it small in tests):

* ``PATHWAYS_TESTING_WARMUP_SECONDS`` (60) — simulated seconds before the API server listens.
* ``PATHWAYS_TESTING_TTFT_MS`` (50) — real milliseconds to a completion's first token.
* ``PATHWAYS_TESTING_TPOT_MS`` (5) — real milliseconds between tokens after the first.
* ``PATHWAYS_TESTING_FAILED_REQUESTS`` (0) — the first N ``/v1/completions`` requests answer
  HTTP 500 ``InternalServerError``, to exercise a benchmark that records failed requests.

It serves until the pod is stopped, then closes the listening socket.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from aiohttp import web

from pathways_airflow.checkpoints import is_gcs, step_dir_of
from pathways_airflow_testing.programs.args import (
    SHELL_OPERATORS,
    BadArgument,
    Params,
    command_tokens,
    env_int,
    env_number,
    parse_params,
)
from pathways_airflow_testing.programs.base import ProgramContext
from pathways_airflow_testing.programs.jetstream import generated_words
from pathways_airflow_testing.programs.training import is_committed

HTTP_PORT = 8000
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
DEFAULT_MAX_TOKENS = 16
MAX_MODEL_LEN = 4096
MAXTEXT_ARCHITECTURE = "MaxTextForCausalLM"
CLI_MODULE = "vllm.entrypoints.cli.main"
LEGACY_SERVER_MODULE = "vllm.entrypoints.openai.api_server"

SERVE_SWITCHES = (
    "enforce-eager", "trust-remote-code", "enable-prefix-caching", "no-enable-prefix-caching",
    "enable-chunked-prefill", "no-enable-chunked-prefill", "disable-log-requests", "disable-log-stats",
    "enable-log-requests", "async-scheduling", "enable-expert-parallel", "enable-auto-tool-choice",
    "disable-frontend-multiprocessing", "headless", "skip-tokenizer-init", "enable-lora",
)  # fmt: skip
"""``vllm serve`` flags that take no value, so the word after them is not read as theirs."""


def is_vllm_cli(word: str) -> bool:
    """``vllm``, a path to it, or the module ``python3 -m`` runs it as."""
    return word == "vllm" or word.endswith("/vllm") or word == CLI_MODULE


def cli_segment(tokens: Sequence[str], subcommand: Sequence[str]) -> list[str] | None:
    """The words after ``vllm <subcommand...>`` up to the end of that shell command, if it is there."""
    width = len(subcommand)
    for index, word in enumerate(tokens):
        if is_vllm_cli(word) and list(tokens[index + 1 : index + 1 + width]) == list(subcommand):
            return _until_operator(tokens[index + 1 + width :])
    return None


def legacy_server_segment(tokens: Sequence[str]) -> list[str] | None:
    """The words after ``-m vllm.entrypoints.openai.api_server``, the server before ``vllm serve``."""
    for index, word in enumerate(tokens):
        if word == LEGACY_SERVER_MODULE:
            return _until_operator(tokens[index + 1 :])
    return None


def _until_operator(words: Sequence[str]) -> list[str]:
    out: list[str] = []
    for word in words:
        if word in SHELL_OPERATORS:
            break
        out.append(word)
    return out


def positional_model(words: Sequence[str]) -> str | None:
    """``MODEL`` of ``vllm serve MODEL``: the first word that is neither a flag nor a flag's value."""
    switches = {f"--{name}" for name in SERVE_SWITCHES}
    index = 0
    while index < len(words):
        word = words[index]
        if not word.startswith("-"):
            return word
        takes_value = "=" not in word and word not in switches
        index += 2 if takes_value and index + 1 < len(words) and not words[index + 1].startswith("-") else 1
    return None


def _json_flag(params: Params, flag: str) -> dict[str, Any] | None:
    """A JSON-object flag, refused the way vLLM's argument parser refuses it."""
    raw = params.text(flag)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as error:
        raise BadArgument(f"argument --{flag}: invalid JSON value: {raw!r} ({error})") from None
    if not isinstance(value, dict):
        raise BadArgument(f"argument --{flag}: expected a JSON object, got {raw!r}")
    return value


@dataclass(frozen=True)
class ServePlan:
    """What one ``vllm serve`` will serve and how, read from its command line and environment."""

    model: str
    served_model_name: str
    host: str
    port: int
    tensor_parallel_size: int
    architectures: tuple[str, ...]
    maxtext_config: Mapping[str, Any] | None
    warmup_seconds: float
    ttft_ms: float
    tpot_ms: float
    failed_requests: int

    @property
    def load_parameters_path(self) -> str | None:
        path = (self.maxtext_config or {}).get("load_parameters_path")
        return str(path).rstrip("/") if path else None

    @classmethod
    def from_command(cls, argv: list[str], env: Mapping[str, str]) -> ServePlan:
        tokens = command_tokens(argv, env)
        served = cli_segment(tokens, ["serve"])
        # Only `vllm serve` takes MODEL as a positional; the API server module and an image's own
        # entrypoint (args alone) take --model.
        words = served if served is not None else legacy_server_segment(tokens) or tokens
        params = parse_params(words, switches=SERVE_SWITCHES)
        positional = positional_model(served) if served is not None else None
        model = positional or params.text("model") or DEFAULT_MODEL
        overrides = _json_flag(params, "hf-overrides") or {}
        architectures = overrides.get("architectures", [])
        if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
            raise BadArgument(f"argument --hf-overrides: architectures={architectures!r}: not a list")
        maxtext = (_json_flag(params, "additional-config") or {}).get("maxtext_config")
        if maxtext is not None and not isinstance(maxtext, dict):
            raise BadArgument(f"argument --additional-config: maxtext_config must be an object: {maxtext!r}")
        plan = cls(
            model=model,
            served_model_name=params.text("served-model-name") or model,
            host=params.text("host") or "0.0.0.0",
            port=params.integer("port", HTTP_PORT),
            tensor_parallel_size=params.integer("tensor-parallel-size", 1),
            architectures=tuple(architectures),
            maxtext_config=maxtext,
            warmup_seconds=env_number(env, "PATHWAYS_TESTING_WARMUP_SECONDS", 60.0),
            ttft_ms=env_number(env, "PATHWAYS_TESTING_TTFT_MS", 50.0),
            tpot_ms=env_number(env, "PATHWAYS_TESTING_TPOT_MS", 5.0),
            failed_requests=env_int(env, "PATHWAYS_TESTING_FAILED_REQUESTS", 0) or 0,
        )
        plan.check()
        return plan

    def check(self) -> None:
        """Refuse what the real server would fail on, or would serve silently wrong."""
        latencies = {"PATHWAYS_TESTING_TTFT_MS": self.ttft_ms, "PATHWAYS_TESTING_TPOT_MS": self.tpot_ms}
        for name, value in latencies.items():
            if value < 0:
                raise BadArgument(f"{name}={value}: must be >= 0")
        uses_maxtext = MAXTEXT_ARCHITECTURE in self.architectures
        if self.maxtext_config is not None and not uses_maxtext:
            raise BadArgument(
                f"--additional-config has a maxtext_config, but --hf-overrides does not set architectures to "
                f'["{MAXTEXT_ARCHITECTURE}"]: vLLM would load {self.model}\'s Hugging Face weights and '
                f"never read the MaxText checkpoint {self.load_parameters_path}"
            )
        if uses_maxtext and not (self.maxtext_config or {}).get("model_name"):
            raise BadArgument(
                f"{MAXTEXT_ARCHITECTURE} needs --additional-config "
                '\'{"maxtext_config": {"model_name": ..., "load_parameters_path": ...}}\''
            )
        path = self.load_parameters_path
        if path is not None and not is_gcs(path):
            raise BadArgument(f"maxtext_config.load_parameters_path={path!r}: only gs:// paths are emulated")


class _ApiError(Exception):
    """An error answer in vLLM's ``ErrorResponse`` shape."""

    def __init__(self, status: int, kind: str, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.kind, self.message, self.param = status, kind, message, param

    def response(self) -> web.Response:
        error = {"message": self.message, "type": self.kind, "param": self.param, "code": self.status}
        return web.json_response({"error": error}, status=self.status)


def _bad_request(message: str, param: str | None = None) -> _ApiError:
    return _ApiError(400, "BadRequestError", message, param)


@dataclass(frozen=True)
class _Completion:
    """One ``/v1/completions`` request, validated."""

    prompt: str
    max_tokens: int
    stream: bool
    include_usage: bool


def read_completion(body: Any, served: str) -> _Completion:
    """The request, or the ``_ApiError`` vLLM answers it with."""
    if not isinstance(body, dict):
        raise _bad_request("expected a JSON object")
    model = body.get("model")
    if model is not None and model != served:
        raise _ApiError(404, "NotFoundError", f"The model `{model}` does not exist.", "model")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise _bad_request("prompt must be a string or a list of one string", "prompt")
    max_tokens = body.get("max_tokens", DEFAULT_MAX_TOKENS)
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise _bad_request(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens")
    stream = body.get("stream", False)
    options = body.get("stream_options") or {}
    if not isinstance(stream, bool) or not isinstance(options, dict):
        raise _bad_request("stream must be a boolean and stream_options an object", "stream")
    if options and not stream:
        raise _bad_request("Stream options can only be defined when `stream=True`.", "stream_options")
    return _Completion(prompt, max_tokens, stream, bool(options.get("include_usage")))


class _OpenAiServer:
    """vLLM's OpenAI routes over the plan, counting requests for ``PATHWAYS_TESTING_FAILED_REQUESTS``."""

    def __init__(self, plan: ServePlan, ctx: ProgramContext):
        self.plan = plan
        self.clock = ctx.clock
        self.completion_requests = 0

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/completions", self.completions)
        return app

    def _created(self) -> int:
        return int(self.clock.now())

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def models(self, request: web.Request) -> web.Response:
        card = {
            "id": self.plan.served_model_name,
            "object": "model",
            "created": self._created(),
            "owned_by": "vllm",
            "root": self.plan.model,
            "parent": None,
            "max_model_len": MAX_MODEL_LEN,
        }
        return web.json_response({"object": "list", "data": [card]})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        self.completion_requests += 1
        try:
            if self.completion_requests <= self.plan.failed_requests:
                raise _ApiError(
                    500, "InternalServerError",
                    f"stand-in failure {self.completion_requests} of {self.plan.failed_requests} "
                    "(PATHWAYS_TESTING_FAILED_REQUESTS)",
                )  # fmt: skip
            try:
                body = await request.json()
            except ValueError as error:
                raise _bad_request(f"invalid JSON body: {error}") from None
            ask = read_completion(body, self.plan.served_model_name)
        except _ApiError as error:
            return error.response()
        words = generated_words(ask.prompt, ask.max_tokens)
        prompt_tokens = len(ask.prompt.split())
        usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + len(words),
                 "completion_tokens": len(words)}  # fmt: skip
        if ask.stream:
            return await self._stream(request, ask, words, usage)
        await asyncio.sleep((self.plan.ttft_ms + self.plan.tpot_ms * (len(words) - 1)) / 1000)
        choice = _choice(" ".join(words), "length")
        header = self._header(f"cmpl-{uuid.uuid4().hex}")
        return web.json_response({**header, "choices": [choice], "usage": usage})

    def _header(self, completion_id: str) -> dict[str, Any]:
        return {"id": completion_id, "object": "text_completion", "created": self._created(),
                "model": self.plan.served_model_name}  # fmt: skip

    async def _stream(
        self, request: web.Request, ask: _Completion, words: list[str], usage: Mapping[str, int]
    ) -> web.StreamResponse:
        """Headers at once, as vLLM's StreamingResponse; the first token after the TTFT."""
        header = self._header(f"cmpl-{uuid.uuid4().hex}")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await response.prepare(request)
        await asyncio.sleep(self.plan.ttft_ms / 1000)
        for index, word in enumerate(words):
            if index:
                await asyncio.sleep(self.plan.tpot_ms / 1000)
            last = index == len(words) - 1
            chunk = {**header, "choices": [_choice(f" {word}", "length" if last else None)], "usage": None}
            await response.write(_event(chunk))
        if ask.include_usage:
            await response.write(_event({**header, "choices": [], "usage": dict(usage)}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _choice(text: str, finish_reason: str | None) -> dict[str, Any]:
    return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}


def _event(payload: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def _info(ctx: ProgramContext, where: str, message: str) -> None:
    """A log line in vLLM's ``INFO MM-DD HH:MM:SS [file.py:line] message`` shape."""
    ctx.log(f"INFO {ctx.clock.utcnow():%m-%d %H:%M:%S} [{where}] {message}")


async def _checkpoint_problem(ctx: ProgramContext, plan: ServePlan) -> str | None:
    path = plan.load_parameters_path
    if path is None:
        return None
    step_dir = step_dir_of(path)
    if await is_committed(ctx.gcs, step_dir):
        return None
    return (
        f"Found incomplete checkpoint at {step_dir}: no commit_success.txt; "
        f"cannot load load_parameters_path={path}"
    )


async def _load(ctx: ProgramContext, plan: ServePlan) -> None:
    """The engine's start-up, on the virtual clock: nothing listens meanwhile."""
    _info(ctx, "api_server.py:1805", f"vLLM API server version 0.0.0-stand-in; model {plan.model}")
    _info(ctx, "tpu_worker.py:80", f"tensor_parallel_size={plan.tensor_parallel_size}; initializing TPU")
    source = plan.load_parameters_path or f"{plan.model} (Hugging Face weights)"
    _info(ctx, "model_loader.py:120", f"Loading weights from {source}...")
    await ctx.clock.sleep(plan.warmup_seconds * 0.8)
    _info(ctx, "model_loader.py:125", f"Loading weights took {plan.warmup_seconds * 0.8:.2f} seconds")
    _info(ctx, "kv_cache_manager.py:200", "Compiling the model and allocating the KV cache...")
    await ctx.clock.sleep(plan.warmup_seconds * 0.2)


async def run(ctx: ProgramContext) -> int:
    try:
        plan = ServePlan.from_command(ctx.argv, ctx.env)
    except BadArgument as error:
        ctx.log(f"error: {error}")
        return 1
    problem = await _checkpoint_problem(ctx, plan)
    if problem is not None:
        ctx.log(f"error: {problem}")
        return 1

    await _load(ctx, plan)
    runner = web.AppRunner(_OpenAiServer(plan, ctx).application(), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        ctx.publish_port(plan.port, sock.getsockname()[1])
        _info(ctx, "api_server.py:1880", f"Starting vLLM API server 0 on http://{plan.host}:{plan.port}")
        ctx.log("INFO:     Application startup complete.")
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
    return 0  # not reached: the server runs until cancelled
