"""The gateway's stats() as frozen records: typed fields over fake hosts, and the plain dict that
`to_json()` gives keeps the shape the string-keyed stats had."""

from __future__ import annotations

import dataclasses
import json

import pytest

from desktop.chat.saved_fields import reply_stats
from desktop.protocol import EngineStats, MatchKind, SlotState, TokenStats, WorkerStats
from fake_host import FakeHost
from gw_helpers import bot, gateway, run, turn, user


def test_stats_are_frozen_records_whose_json_keeps_the_old_shape() -> None:
    async def main() -> None:
        host = FakeHost("w1", num_slots=2)
        async with gateway(host) as gw:
            await turn(gw, (host,), [user("hi")], "Hi!")
            await turn(gw, (host,), [user("hi"), bot("Hi!"), user("again")])
            stats = gw.stats()
            assert isinstance(stats, EngineStats) and isinstance(stats.workers[0], WorkerStats)
            with pytest.raises(dataclasses.FrozenInstanceError):
                stats.sessions = 3  # type: ignore[misc]
            assert stats.requests.completed == 2 and stats.routing["hit"] == 1
            assert stats.cache == {MatchKind.MISS: 1, MatchKind.EXTEND: 1}
            data = json.loads(json.dumps(stats.to_json()))
            assert set(data) == {"workers", "queue", "requests", "origins", "routing", "cache", "sessions"}
            assert set(data["workers"][0]) == {"id", "state", "capacity", "in_flight", "calls", "slots", "sessions"}
            assert set(data["workers"][0]["slots"][0]) == {"index", "in_use", "session_id", "tokens", "hashes",
                                                         "last_used", "running"}
            assert set(data["queue"]) == {"length", "max", "entries", "wait_ms_p50", "wait_ms_p95", "eta_avg_s",
                                          "service_avg_s"}
            assert data["cache"] == {"miss": 1, "extend": 1} and data["origins"] == {"app": 2}
    run(main())


def test_kinds_and_slot_states_take_their_words_and_refuse_others() -> None:
    assert TokenStats(kind="extend").kind is MatchKind.EXTEND and str(MatchKind.EXTEND) == "extend"
    saved = json.loads(json.dumps(dataclasses.asdict(TokenStats(kind="hit"))))
    assert saved["kind"] == "hit" and reply_stats(saved)["kind"] == "hit"  # saved and loaded again as its word
    assert json.loads(json.dumps({"kind": MatchKind.HIT})) == {"kind": "hit"}
    assert SlotState("busy") is SlotState.BUSY and f"{SlotState.SESSION}" == "session"
    with pytest.raises(ValueError):
        TokenStats(kind="sometimes")
