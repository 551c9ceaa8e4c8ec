"""Where a MaxText image keeps its programs and its base config, by layout. Pure.

MaxText moved its modules in 2026 without leaving the old names behind: an image built from a
current MaxText has no ``MaxText.train`` and no ``MaxText.generate_param_only_checkpoint``, and an
older one has neither of the new names. So the layout is the user's to say, never guessed: a
guess that picks the wrong one runs a module the image does not have.

* ``current`` (MaxText v0.2.0 and later): ``maxtext.trainers.pre_train.train``,
  ``maxtext.utils.generate_param_only_checkpoint``; the configs under ``src/maxtext/configs/``,
  relative to the image's working directory ``/deps`` (maxtext
  ``src/dependencies/dockerfiles/maxtext_runner.Dockerfile``: ``WORKDIR /deps``,
  ``MAXTEXT_PKG_DIR=/deps/src/maxtext``; ``docs/guides/...`` run
  ``python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml ...``).
* ``legacy`` (images built before it): ``MaxText.train``, ``MaxText.generate_param_only_checkpoint``
  and ``MaxText/configs/base.yml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pathways_airflow.spec.errors import SpecProblem


@dataclass(frozen=True)
class MaxTextLayout:
    """The module paths and base config of one MaxText layout."""

    name: str
    train_module: str
    convert_module: str
    base_config: str

    @property
    def convert_command(self) -> tuple[str, ...]:
        return ("python3", "-m", self.convert_module)


CURRENT = MaxTextLayout("current", "maxtext.trainers.pre_train.train", "maxtext.utils.generate_param_only_checkpoint", "src/maxtext/configs/base.yml")
LEGACY = MaxTextLayout("legacy", "MaxText.train", "MaxText.generate_param_only_checkpoint", "MaxText/configs/base.yml")
LAYOUTS = {layout.name: layout for layout in (CURRENT, LEGACY)}
DEFAULT_LAYOUT = CURRENT.name
"""What an image built today has."""


def maxtext_layout(value: Any, field: str = "maxtext_layout") -> tuple[MaxTextLayout, SpecProblem | None]:
    """The layout named ``value``; an unknown name is a problem (and the default stands in, so the
    other checks still run)."""
    layout = LAYOUTS.get(value) if isinstance(value, str) else None
    if layout is not None:
        return layout, None
    reason = "the MaxText layout of your image: 'current' (MaxText v0.2.0 and later) or 'legacy' (older images)"
    return LAYOUTS[DEFAULT_LAYOUT], SpecProblem(field, value, reason, tuple(LAYOUTS))
