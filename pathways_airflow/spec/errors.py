"""The one error type the spec layer raises for bad input.

Every problem names the field, the value that was seen and, where there is a closed set, the valid
choices, so a DAG author can fix the DAG from the message alone. It subclasses ``ValueError`` so
callers that only know Python's built-ins still catch it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a workload spec."""

    field: str
    value: Any
    reason: str
    choices: Sequence[str] = ()

    def __str__(self) -> str:
        text = f"{self.field}={self.value!r}: {self.reason}"
        if self.choices:
            text += f"; valid: {', '.join(map(str, self.choices))}"
        return text


class InvalidWorkloadSpec(ValueError):
    """A workload spec that must not be submitted; lists every problem found, not just the first."""

    def __init__(self, problems: Iterable[SpecProblem]):
        self.problems: tuple[SpecProblem, ...] = tuple(problems)
        if not self.problems:
            raise ValueError("InvalidWorkloadSpec needs at least one problem")
        if len(self.problems) == 1:
            message = f"invalid workload spec: {self.problems[0]}"
        else:
            lines = "\n".join(f"  - {p}" for p in self.problems)
            message = f"invalid workload spec ({len(self.problems)} problems):\n{lines}"
        super().__init__(message)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(p.field for p in self.problems)


def raise_if_any(problems: Iterable[SpecProblem]) -> None:
    """Raise one :class:`InvalidWorkloadSpec` for all ``problems``, if there are any."""
    collected = list(problems)
    if collected:
        raise InvalidWorkloadSpec(collected)
