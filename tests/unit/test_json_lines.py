"""A watch stream's newline-delimited JSON, however the chunks cut it."""

from __future__ import annotations

import json

import pytest

from pathways_airflow.hooks import api
from pathways_airflow.hooks.api import JsonLines

pytestmark = [pytest.mark.unit, pytest.mark.pure]

EVENTS = [{"type": "MODIFIED", "object": {"metadata": {"name": f"train-{i}", "resourceVersion": str(i)}}} for i in range(50)]
STREAM = b"".join(json.dumps(e).encode() + b"\n" for e in EVENTS)


def read(chunks):
    lines = JsonLines()
    return [event for chunk in chunks for event in lines.feed(chunk)]


def test_many_events_in_one_chunk_come_out_in_order():
    assert read([STREAM]) == EVENTS


@pytest.mark.parametrize("size", [1, 2, 7, 64, 1000])
def test_events_cut_anywhere_come_out_whole(size):
    assert read([STREAM[i : i + size] for i in range(0, len(STREAM), size)]) == EVENTS


def test_blank_lines_are_skipped_and_a_line_waits_for_its_newline():
    lines = JsonLines()
    assert lines.feed(b'\n\n{"type": "BOOK') == []
    assert lines.feed(b'MARK"}') == []
    assert lines.feed(b"\r\n  \n") == [{"type": "BOOKMARK"}]


def test_a_burst_is_decoded_in_one_pass(monkeypatch):
    # Linear time: the chunk is decoded in one call, not once per line with the rest copied each time.
    calls = []
    real = api._decoder_of(None)

    class Counting:
        def decode_lines(self, data):
            calls.append(len(data))
            return real.decode_lines(data)

    monkeypatch.setattr(api, "_decoder_of", lambda shape: Counting())
    burst = STREAM * 40
    assert len(JsonLines().feed(burst)) == 2000
    assert calls == [len(burst) - 1]  # everything but the last newline


def test_a_broken_line_is_a_value_error_as_json_loads_raised():
    with pytest.raises(ValueError):
        JsonLines().feed(b'{"type": "ADDED", "object": \n')
