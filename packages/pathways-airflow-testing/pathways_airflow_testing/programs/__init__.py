"""Stand-in workloads: what each container of the local cluster runs instead of the real image.

No image is ever pulled. When the cluster starts a container, ``choose_program(argv, env, image)``
picks a stand-in from the container's command line, environment and image, by these rules, in
this order (the first that matches wins):

1. ``PATHWAYS_TESTING_PROGRAM`` in the container's environment names the stand-in outright:
   ``training``, ``conversion``, ``jetstream``, ``benchmark``, ``vllm``, ``vllm_bench``, ``idle``
   or ``exit``.
2. The command line (``command`` + ``args``; a ``sh``/``bash -c`` script is split into words,
   with ``$VAR`` taken from the container's environment). Only program words count, not
   ``key=value`` settings, ``--flags`` or ``gs://`` paths:

   * ``vllm bench …`` (the word ``vllm``, a path ending in ``/vllm``, or the module
     ``vllm.entrypoints.cli.main`` run by ``python3 -m``, followed by ``bench``) → ``vllm_bench``
   * ``vllm serve …`` (the same three spellings), or ``-m vllm.entrypoints.openai.api_server``
     → ``vllm``. Both vLLM rules come first: a vLLM command's flags may name anything.
   * vLLM's ``multi-node-serving.sh worker`` (a Ray worker of a multi-host server, as in a
     LeaderWorkerSet's worker pods; vllm ``examples/online_serving/multi-node-serving.sh``) → ``idle``
   * ``generate_param_only_checkpoint`` (module or script) → ``conversion``
   * ``maxtext.trainers.pre_train.train`` or ``MaxText.train`` (any ``*.train`` module) or a
     ``train.py`` script → ``training``
   * ``benchmark_serving`` → ``benchmark``
   * ``maxengine_server`` or anything with ``jetstream`` in it → ``jetstream``
   * ``exit N`` → ``exit`` with code ``N``
3. The image: Pathways server images (``…/pathways/server``, ``…/pathways/proxy_server``, the
   colocated Python sidecar, anything under a ``/pathways/`` repository) → ``idle``; JetStream's
   ``jetstream-http`` front end → ``idle`` (the model server's stand-in already answers on its
   port 8000); vLLM's TPU image (``vllm-tpu``, as ``vllm/vllm-tpu:latest``) → ``vllm``; any other
   image with ``jetstream`` or ``maxengine`` in its name, as the ``jax-tpu`` container of Google's
   JetStream-on-Pathways manifests → ``jetstream``.
4. Anything else → ``idle``: it logs one line and runs until stopped.

Both MaxText layouts run, unless ``PATHWAYS_TESTING_MAXTEXT_LAYOUT`` (``current`` or ``legacy``)
makes the image hold one only: then a training or conversion command naming a module or config
file of the other layout fails as Python does ("No module named", "No such file or directory").

What each stand-in reads from its command line and its ``PATHWAYS_TESTING_*`` knobs is in the
docstring of its module: ``training``, ``conversion``, ``jetstream``, ``benchmark``, ``vllm``,
``vllm_bench``, ``idle``.
"""

from __future__ import annotations

import re
from typing import Mapping

from pathways_airflow_testing.programs import (
    benchmark,
    conversion,
    idle,
    jetstream,
    training,
    vllm,
    vllm_bench,
)
from pathways_airflow_testing.programs.args import command_tokens, exit_code_in
from pathways_airflow_testing.programs.base import Program, ProgramContext

PROGRAM_ENV = "PATHWAYS_TESTING_PROGRAM"
MAXTEXT_LAYOUT_ENV = "PATHWAYS_TESTING_MAXTEXT_LAYOUT"
_MAXTEXT_LAYOUTS = {
    # maxtext v0.2.0+: the package under src/maxtext/ of the image's /deps
    # (src/dependencies/dockerfiles/maxtext_runner.Dockerfile), modules maxtext.*
    "current": ("maxtext.", "src/maxtext/"),
    # images built before it: the MaxText/ package, modules MaxText.*
    "legacy": ("MaxText.", "MaxText/"),
}

PROGRAMS: Mapping[str, Program] = {
    "training": training.run,
    "conversion": conversion.run,
    "jetstream": jetstream.run,
    "benchmark": benchmark.run,
    "vllm": vllm.run,
    "vllm_bench": vllm_bench.run,
    "idle": idle.idle,
    "exit": idle.exit_with_code,
}

_TRAIN_MODULE = re.compile(r"^[A-Za-z_][\w.]*\.train$")
_PATHWAYS_IMAGE_NAMES = frozenset(
    {"server", "proxy_server", "colocated-python-sidecar", "colocated_python_sidecar", "sidecar"}
)


def program_name(argv: list[str], env: Mapping[str, str], image: str) -> str:
    """The name of the stand-in a container runs (a key of ``PROGRAMS``), by the module's rules.

    A ``PATHWAYS_TESTING_PROGRAM`` that names no stand-in is returned as given; ``choose_program``
    turns it into a program that explains the mistake.
    """
    forced = (env.get(PROGRAM_ENV) or "").strip().lower()
    if forced:
        return forced
    tokens = command_tokens(argv, env)
    engine = _vllm_program(tokens)
    if engine is not None:
        return engine
    words = [t for t in tokens if _is_program_word(t)]
    if any(w.endswith("multi-node-serving.sh") for w in words) and "worker" in words:
        return "idle"
    if any("generate_param_only_checkpoint" in w for w in words):
        return "conversion"
    if any(_is_training_entry_point(w) for w in words):
        return "training"
    if any("benchmark_serving" in w for w in words):
        return "benchmark"
    if any("maxengine_server" in w.lower() or "jetstream" in w.lower() for w in words):
        return "jetstream"
    if exit_code_in(tokens) is not None:
        return "exit"
    return _by_image(image)


def choose_program(argv: list[str], env: Mapping[str, str], image: str) -> Program:
    """The stand-in a container runs; see the module docstring for the rules."""
    name = program_name(argv, env, image)
    if name in ("training", "conversion"):
        missing = missing_from_the_image(argv, env)
        if missing:
            return _python_error(missing)
    if name in PROGRAMS:
        return PROGRAMS[name]
    return _misconfigured(name)


def missing_from_the_image(argv: list[str], env: Mapping[str, str]) -> str | None:
    """With ``PATHWAYS_TESTING_MAXTEXT_LAYOUT`` (``current`` or ``legacy``) the image holds one
    MaxText layout only, as a real one does: a module or a config file of the other layout is
    Python's error. Without it, both layouts run."""
    layout = (env.get(MAXTEXT_LAYOUT_ENV) or "").strip()
    if layout not in _MAXTEXT_LAYOUTS:
        return None
    other_module, other_dir = next(held for name, held in _MAXTEXT_LAYOUTS.items() if name != layout)
    for word in filter(_is_program_word, command_tokens(argv, env)):
        if word.startswith(other_module) and "/" not in word:
            return f"ModuleNotFoundError: No module named '{word.split('.', 1)[0]}'"
        if word.startswith(other_dir):
            return f"FileNotFoundError: [Errno 2] No such file or directory: '{word}'"
    return None


def _python_error(message: str) -> Program:
    async def fail(ctx: ProgramContext) -> int:
        ctx.log("Traceback (most recent call last):")
        ctx.log(message)
        return 1

    return fail


def _vllm_program(tokens: list[str]) -> str | None:
    """``vllm_bench`` for ``vllm bench``, ``vllm`` for ``vllm serve`` or the legacy API server module."""
    if vllm.cli_segment(tokens, ["bench"]) is not None:
        return "vllm_bench"
    if vllm.cli_segment(tokens, ["serve"]) is not None or vllm.legacy_server_segment(tokens) is not None:
        return "vllm"
    return None


def _is_program_word(token: str) -> bool:
    return not token.startswith(("-", "gs://")) and "=" not in token


def _is_training_entry_point(word: str) -> bool:
    return word.rsplit("/", 1)[-1] == "train.py" or bool(_TRAIN_MODULE.match(word))


def _image_path(image: str) -> str:
    """``registry/repo/name`` without ``:tag`` or ``@digest``, lower-cased."""
    path = image.split("@", 1)[0]
    head, _, last = path.rpartition("/")
    last = last.split(":", 1)[0]
    return (f"{head}/{last}" if head else last).lower()


def _by_image(image: str) -> str:
    path = _image_path(image)
    name = path.rsplit("/", 1)[-1]
    if "/pathways/" in f"/{path}" or name in _PATHWAYS_IMAGE_NAMES or name.startswith("pathways"):
        return "idle"
    if "jetstream-http" in name:
        return "idle"
    if name == "vllm-tpu":
        return "vllm"
    if "jetstream" in name or "maxengine" in name:
        return "jetstream"
    return "idle"


def _misconfigured(name: str) -> Program:
    async def explain(ctx: ProgramContext) -> int:
        ctx.log(f"error: {PROGRAM_ENV}={name!r} names no stand-in; use one of: {', '.join(PROGRAMS)}")
        return 1

    return explain


__all__ = ["MAXTEXT_LAYOUT_ENV", "PROGRAMS", "PROGRAM_ENV", "choose_program", "missing_from_the_image", "program_name"]
