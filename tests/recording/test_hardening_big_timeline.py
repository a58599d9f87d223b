"""Issue 19, item 12 (big timelines): a timeline is streamed, not read whole; the streamed deltas of a
reply are dropped once its final text is in, and the text kept is bounded. Measured as peak memory
(tracemalloc) against the file's size: it was ~9× (a 1 GB timeline needed 3.4 GB), now well under 1×."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from desktop.recording.reader import open_recording
from desktop.recording.timeline import MAX_LINE

pytestmark = pytest.mark.hardening


def chat_timeline(folder, turns: int, deltas: int) -> int:
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"version": 1, "type": "chat", "started_at": 1.7e9, "ended_at": None}))
    t = 0.0
    with (folder / "timeline.jsonl").open("w", encoding="utf-8") as f:
        for turn in range(1, turns + 1):
            f.write(json.dumps({"t": t, "kind": "user_text", "text": f"question {turn}", "turn": turn}) + "\n")
            for i in range(deltas):
                t += 0.01
                f.write(json.dumps({"t": round(t, 4), "kind": "assistant_delta", "text": f" token{i}", "turn": turn}) + "\n")
            reply = "".join(f" token{i}" for i in range(deltas))
            f.write(json.dumps({"t": round(t, 4), "kind": "assistant_text", "text": reply, "turn": turn}) + "\n")
    return (folder / "timeline.jsonl").stat().st_size


def test_peak_memory_stays_below_the_timeline_size(tmp_path):
    folder = tmp_path / "20261125-100000-chat-0000beef"
    size = chat_timeline(folder, turns=300, deltas=100)  # 30,600 lines, ~2.5 MB
    tracemalloc.start()
    try:
        rec = open_recording(folder)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(rec.turns) == 300 and rec.turns[-1].assistant_text.endswith(" token99")
    assert rec.turns[0].user_text == "question 1" and rec.problems == []
    assert peak < 0.6 * size, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB timeline"


def test_text_kept_is_bounded_and_said(tmp_path):
    folder = tmp_path / "20261125-100000-chat-0000cafe"
    chat_timeline(folder, turns=50, deltas=20)
    rec = open_recording(folder, max_text=2000)
    kept = sum(len(t.user_text) + len(t.assistant_text) for t in rec.turns)
    assert kept <= 2000 and len(rec.turns) == 50
    assert any("too long" in p for p in rec.problems)


def test_a_line_longer_than_the_limit_is_skipped_unread(tmp_path):
    folder = tmp_path / "20261125-100000-chat-0000f00d"
    chat_timeline(folder, turns=1, deltas=2)
    with (folder / "timeline.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"t": 5, "kind": "note", "text": "' + "x" * (MAX_LINE + 10) + '"}\n')
        f.write('{"t": 6, "kind": "user_text", "text": "after", "turn": 2}\n')
    rec = open_recording(folder)
    assert [t.user_text for t in rec.turns] == ["question 1", "after"]
    assert rec.problems == ["timeline line 5 could not be read (skipped)"]
