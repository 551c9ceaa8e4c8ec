"""Reading a container's command line the way the stand-ins need it. Pure: no I/O.

Commands reach a container in many shapes: ``python3 -m MaxText.train base.yml steps=100``,
``python3 benchmark_serving.py --num-prompts 10``, or a whole script in
``bash -c "python3 ... && gsutil cp ..."``. ``command_tokens`` flattens all of them into one
list of words (splitting ``-c`` scripts as the shell would, expanding ``$VAR`` from the container's
environment), and ``parse_params`` reads MaxText's ``key=value`` and argparse's ``--flag value`` /
``--flag=value`` from anywhere in it, later occurrences winning as they do in MaxText.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ash", "ksh"})
SHELL_OPERATORS = frozenset(
    {"&&", "||", ";", ";;", "|", "&", "(", ")", "<", ">", ">>", "<<", "|&", ">&", "&>"}
)

_KEY_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\-]*)=(.*)$", re.DOTALL)
_FLAG = re.compile(r"^--([A-Za-z0-9][A-Za-z0-9_.\-]*)(?:=(.*))?$", re.DOTALL)
_SHORT_OPTIONS_WITH_C = re.compile(r"^-[A-Za-z]*c[A-Za-z]*$")
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_MAX_SHELL_DEPTH = 4


class BadArgument(ValueError):
    """A stand-in was given a command line or environment it cannot run with."""


def command_tokens(argv: Iterable[str], env: Mapping[str, str] = MappingProxyType({})) -> list[str]:
    """``argv`` with each ``sh -c SCRIPT`` replaced by the script's words."""
    return _expand(list(argv), env, depth=0)


def _expand(argv: list[str], env: Mapping[str, str], depth: int) -> list[str]:
    for index, token in enumerate(argv):
        if token.rsplit("/", 1)[-1] not in SHELLS or depth >= _MAX_SHELL_DEPTH:
            continue
        script_at = _script_index(argv, index + 1)
        if script_at is None:
            continue
        script_words = [_substitute(word, env) for word in split_script(argv[script_at])]
        return (
            argv[: script_at]
            + _expand(script_words, env, depth + 1)
            + _expand(argv[script_at + 1 :], env, depth)
        )
    return argv


def _script_index(argv: list[str], start: int) -> int | None:
    """Where the ``-c`` script of a shell invocation starting at ``start`` is, if it has one."""
    index, has_c = start, False
    while index < len(argv) and argv[index][:1] in ("-", "+") and argv[index] not in ("-", "--"):
        option = argv[index]
        if option in ("-o", "+o", "-O", "+O"):
            index += 1  # takes a value: ``bash -o pipefail -c ...``
        elif _SHORT_OPTIONS_WITH_C.match(option):
            has_c = True
        index += 1
    if index < len(argv) and argv[index] == "--":
        index += 1
    return index if has_c and index < len(argv) else None


def split_script(script: str) -> list[str]:
    """A shell script's words, with ``&&``, ``;``, ``|``… as words of their own; a backslash before
    a newline continues the line, a newline ends a command as ``;`` does (its comment first)."""
    script = script.replace("\\\n", " ").replace("\n", "\n;")
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: the shell would refuse it too, but still show words
        return script.split()


def _substitute(word: str, env: Mapping[str, str]) -> str:
    return _VARIABLE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), word)


def normalize_key(key: str) -> str:
    """``--num-prompts`` and ``num_prompts`` are the same setting."""
    return key.replace("-", "_")


@dataclass(frozen=True)
class Params:
    """Settings read from a command line, with typed accessors that explain bad values."""

    values: Mapping[str, str]

    def __contains__(self, key: str) -> bool:
        return normalize_key(key) in self.values

    def text(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(normalize_key(key), default)

    def integer(self, key: str, default: int) -> int:
        raw = self.text(key)
        if raw is None:
            return default
        try:
            return int(raw)
        except ValueError:
            raise BadArgument(f"{key}={raw!r}: not an integer") from None

    def number(self, key: str, default: float) -> float:
        raw = self.text(key)
        return default if raw is None else _number(f"{key}={raw!r}", raw)

    def flag(self, key: str, default: bool = False) -> bool:
        raw = self.text(key)
        return default if raw is None else _boolean(f"{key}={raw!r}", raw)


def parse_params(tokens: Iterable[str], *, switches: Iterable[str] = ()) -> Params:
    """``key=value``, ``--flag=value`` and ``--flag value`` settings; a bare ``--flag`` is ``true``.

    ``switches`` name flags that never take a value (``--save-result``), so the word after them
    is not mistaken for theirs.
    """
    words = list(tokens)
    no_value = {normalize_key(s.lstrip("-")) for s in switches}
    values: dict[str, str] = {}
    index = 0
    while index < len(words):
        word = words[index]
        flag = _FLAG.match(word)
        if flag:
            key = normalize_key(flag.group(1))
            if flag.group(2) is not None:
                values[key] = flag.group(2)
            elif key not in no_value and index + 1 < len(words) and _is_value(words[index + 1]):
                values[key] = words[index + 1]
                index += 1
            else:
                values[key] = "true"
        elif not word.startswith("-"):
            pair = _KEY_VALUE.match(word)
            if pair:
                values[normalize_key(pair.group(1))] = pair.group(2)
        index += 1
    return Params(values)


def _is_value(word: str) -> bool:
    return not word.startswith("--") and word not in SHELL_OPERATORS


def exit_code_in(tokens: Iterable[str]) -> int | None:
    """The code of the first ``exit N`` in a command's words."""
    words = list(tokens)
    for word, following in zip(words, words[1:]):
        if word == "exit" and re.fullmatch(r"\d{1,3}", following):
            return int(following) % 256
    return None


def env_number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    return default if raw is None or raw.strip() == "" else _number(f"{name}={raw!r}", raw)


def env_int(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadArgument(f"{name}={raw!r}: not an integer") from None


def _number(what: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise BadArgument(f"{what}: not a number") from None
    if math.isnan(value):
        raise BadArgument(f"{what}: not a number")
    return value


def _boolean(what: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise BadArgument(f"{what}: expected true or false")


def describe(argv: Iterable[str]) -> str:
    """A command line as a person would type it, for log lines."""
    return shlex.join(list(argv))
