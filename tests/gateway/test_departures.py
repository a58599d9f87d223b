"""The gateway's memory of where conversations were cached when their worker left: each slot's
prefix hashes but the first (a new conversation's history), session slots aside, bounded with the
oldest dropped, told once and only to another worker; why a worker's status took it down."""

from __future__ import annotations

import pytest

from desktop.gateway.departures import Departures, why_down
from desktop.model.messages import Message, history_hash, prefix_hashes
from desktop.protocol import SlotInfo, WorkerState, WorkerStatus


def slot(index: int, messages: list[Message], session_id: str | None = None) -> SlotInfo:
    return SlotInfo(index, "idle", tuple(prefix_hashes(messages)), 10 * len(messages), 0.0, session_id, 0)


CONV = [Message("system", "Be brief."), Message("user", "hi"), Message("assistant", "Hello.")]


def test_a_conversation_held_by_a_departed_worker_is_told_once_to_another_worker() -> None:
    d = Departures()
    d.record("remote0", "unreachable", [slot(0, CONV)])
    history = history_hash(CONV + [Message("user", "more")])
    assert d.take(history, "remote0") is None  # back on the same worker: its own reason holds
    d.record("remote0", "unreachable", [slot(0, CONV)])
    assert d.take(history, "cpu0") == "moved from remote0 (unreachable)"
    assert d.take(history, "cpu0") is None  # told once
    assert d.take(b"", "cpu0") is None


def test_new_conversations_and_session_slots_are_not_recorded() -> None:
    d = Departures()
    d.record("a", "removed", [slot(0, CONV), slot(1, [Message("user", "x"), Message("assistant", "y")], "s-1")])
    assert len(d) == 2  # CONV's hashes of [system, user] and of the whole, not of [system] alone
    assert d.take(history_hash([CONV[0], Message("user", "another")]), "b") is None  # same system prompt, new
    assert d.take(history_hash(CONV[:2] + [Message("user", "edit")]), "b") == "moved from a (removed)"


def test_the_map_is_bounded_and_the_latest_departure_wins() -> None:
    d = Departures(limit=3)
    convs = [[Message("user", f"q{i}"), Message("assistant", "a"), Message("user", "b")] for i in range(3)]
    for i, conv in enumerate(convs):
        d.record(f"w{i}", "removed", [slot(0, conv)])  # 2 hashes each
    assert len(d) == 3
    assert d.take(prefix_hashes(convs[0])[1], "x") is None  # the oldest were dropped
    assert d.take(prefix_hashes(convs[2])[2], "x") == "moved from w2 (removed)"
    d.record("w1", "removed", [slot(0, convs[1])])
    d.record("w9", "restarted", [slot(0, convs[1])])
    assert d.take(prefix_hashes(convs[1])[1], "x") == "moved from w9 (restarted)"
    with pytest.raises(ValueError):
        Departures(limit=0)


@pytest.mark.parametrize("status, words", [
    (WorkerStatus("r", WorkerState.ERROR, "no answer", code="remote_unreachable"), "unreachable"),
    (WorkerStatus("w", WorkerState.ERROR, "died", code="worker_crashed", restarting=True), "restarted"),
    (WorkerStatus("w", WorkerState.ERROR, "silent", code="worker_hung"), "stopped responding"),
    (WorkerStatus("w", WorkerState.ERROR, "died", code="worker_crashed"), "stopped"),
    (WorkerStatus("w", WorkerState.LOADING), "reloaded"),
])
def test_why_a_worker_went_down(status: WorkerStatus, words: str) -> None:
    assert why_down(status) == words
