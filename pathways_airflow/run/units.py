"""How a span of time reads in a log line, a summary or the UI: one format everywhere. Pure."""

from __future__ import annotations

import math


def duration(seconds: float | None) -> str:
    """``4.2 s``, ``41 s``, ``3 min 12 s``, ``2 h 03 min``: a span as a person reads it, to the unit that matters."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {(whole % 3600) // 60:02d} min"


__all__ = ["duration"]
