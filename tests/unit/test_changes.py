"""What a worker's object watch counts as a change (``hooks.changes``), on real-shaped watch events."""

from __future__ import annotations

from pathways_airflow.hooks.changes import changed_event, version_of


def test_bookmarks_and_the_version_read_leave_the_object_as_read():
    assert not changed_event({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}, "7")
    assert not changed_event({"type": "ADDED", "object": {"metadata": {"resourceVersion": "7"}}}, "7")
    assert changed_event({"type": "MODIFIED", "object": {"metadata": {"resourceVersion": "8"}}}, "7")
    assert changed_event({"type": "DELETED", "object": {"metadata": {"resourceVersion": "9"}}}, "7")
    assert changed_event({"type": "ERROR", "object": {"code": 410}}, "7")
    assert version_of(None) is None and version_of({"metadata": {}}) is None
    assert version_of({"metadata": {"resourceVersion": "42"}}) == "42"
