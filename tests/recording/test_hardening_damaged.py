"""Issue 19, item 1: a recording with impossible numbers (`"ended_at": Infinity`, `"started_at": 1e20`,
`ended_at: 1e300`, a timeline `t: 1e999`) is listed and opened as damaged, never raised; every number
read from meta.json and the timeline is checked (hypothesis fuzzes the fields)."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desktop.recording.library import scan, summarize
from desktop.recording.reader import RecordingError, open_recording
from desktop.recording.sane import MAX_T
from recording_samples import sample_chat

pytestmark = pytest.mark.hardening
START = 1_764_000_000.0


def damaged_folder(root: Path, name: str, meta: dict | str, timeline: str = "") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(meta if isinstance(meta, str) else json.dumps(meta), encoding="utf-8")
    (folder / "timeline.jsonl").write_text(timeline, encoding="utf-8")
    return folder


def meta(**fields) -> dict:
    return {"version": 1, "type": "chat", "title": "Bad", "started_at": START, "ended_at": START + 10.0,
            "user_rate": 16000, "ai_rate": 22050, **fields}


LINES = '{"t": 1.0, "kind": "user_text", "text": "hi", "turn": 1}\n{"t": 2.0, "kind": "assistant_text", "text": "yo", "turn": 1}\n'


@pytest.fixture
def bad(tmp_path) -> dict[str, Path]:
    root = tmp_path / "recordings"
    return {
        "ended_inf": damaged_folder(root, "20261125-100000-chat-00000001", meta(ended_at=math.inf), LINES),
        "started_1e20": damaged_folder(root, "20261125-100000-chat-00000002", meta(started_at=1e20), LINES),
        "t_1e999": damaged_folder(root, "20261125-100000-call-00000003", meta(ended_at=None),
                                  LINES + '{"t": 1e999, "kind": "note", "text": "x"}\n'),
        "ended_1e300": damaged_folder(root, "20261125-100000-chat-00000004", meta(ended_at=1e300), LINES),
        "rate_nan": damaged_folder(root, "20261125-100000-call-00000005", meta(user_rate=math.nan), LINES),
    }


def sane_summary(s) -> None:
    for value in (s.started_at, s.duration):
        assert math.isfinite(value) and 0 <= value
    assert s.duration <= MAX_T


def test_impossible_times_list_as_damaged(bad):
    rows = {s.folder: s for s in scan(next(iter(bad.values())).parent)}
    assert len(rows) == len(bad)
    for name, folder in bad.items():
        s = rows[folder]
        sane_summary(s)
        assert s.damaged, name  # shown as damaged, with the reason
    assert "end time" in rows[bad["ended_inf"]].damaged and "start time" in rows[bad["started_1e20"]].damaged
    assert rows[bad["started_1e20"]].started_at > 0  # the folder's name stands in for the start
    assert "impossible time" in rows[bad["t_1e999"]].damaged and rows[bad["t_1e999"]].duration == 2.0


def test_impossible_times_open_with_their_problems_said(bad):
    for name, folder in bad.items():
        rec = open_recording(folder)
        assert math.isfinite(rec.duration) and 0 <= rec.duration <= MAX_T, name
        assert math.isfinite(rec.started_at), name
        assert rec.problems, name
        assert [t.user_text for t in rec.turns] == ["hi"], name
    rec = open_recording(bad["ended_1e300"])
    assert rec.duration == 2.0 and rec.meta["ended_at"] is None


def test_numbers_past_float_and_names_without_a_date(tmp_path):
    """An int too big for a float, a NUL in a file name, a session-like name that is no date."""
    folder = damaged_folder(tmp_path, "20261399-999999-call-0000000a", '{"version": 1, "started_at": 1' + "0" * 400 + "}",
                            '{"t": 1, "kind": "audio", "track": "user", "file": "a\\u0000b", "start": 1, "duration": 1,'
                            ' "rate": 1' + "0" * 400 + '}\n{"t": 1' + "0" * 400 + ', "kind": "end"}\n[[[[\n')
    s = summarize(folder)
    sane_summary(s)
    rec = open_recording(folder)
    assert rec.user.empty and not rec.complete and math.isfinite(rec.duration)


# ---------------------------------------------------------------------------- fuzzing

weird = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
good_or_weird = lambda good: st.one_of(st.just(good), weird)  # noqa: E731
metas = st.fixed_dictionaries({
    "version": good_or_weird(1), "type": good_or_weird("call"), "title": good_or_weird("T"),
    "started_at": good_or_weird(START), "ended_at": good_or_weird(START + 5.0),
    "first_words": good_or_weird("hi"), "user_rate": good_or_weird(16000), "ai_rate": good_or_weird(22050),
    "video": good_or_weird(False), "replay": good_or_weird({"audio": None, "video": None}),
})
lines = st.fixed_dictionaries({
    "t": good_or_weird(1.5), "kind": st.sampled_from(["user_text", "assistant_text", "assistant_delta", "barge_in",
                                                      "turn_metrics", "audio", "frame", "note", "end", "image"]),
    "turn": good_or_weird(1), "text": good_or_weird("words"), "heard": good_or_weird("wo"),
    "ttft_ms": good_or_weird(12.0), "track": good_or_weird("user"), "file": good_or_weird("user_audio/x.wav"),
    "start": good_or_weird(0.5), "duration": good_or_weird(1.0), "rate": good_or_weird(16000),
})


def dump(obj) -> str:
    return json.dumps(obj, default=str)  # json writes NaN/Infinity and big ints as Python does


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(meta=metas, events=st.lists(lines, max_size=6))
def test_fuzzed_meta_and_timeline_never_raise(tmp_path, meta, events):
    folder = Path(tempfile.mkdtemp(dir=tmp_path)) / "20261125-100000-call-0000abcd"
    damaged_folder(folder.parent, folder.name, dump(meta), "".join(dump(e) + "\n" for e in events))
    s = summarize(folder)
    sane_summary(s)
    try:
        rec = open_recording(folder)
    except RecordingError:  # only "a newer Omnidesk" may refuse it
        assert isinstance(meta["version"], int) and meta["version"] > 1
        return
    assert math.isfinite(rec.duration) and 0 <= rec.duration <= MAX_T
    assert all(0 <= t.start <= MAX_T for t in rec.turns) and all(0 <= b <= MAX_T for b in rec.barge_ins)
    for track in (rec.user, rec.ai):
        assert 1000 <= track.rate <= 384_000 and math.isfinite(track.duration)


def test_a_good_chat_is_not_damaged(tmp_path):
    s = summarize(sample_chat(tmp_path).folder)
    assert not s.damaged and s.complete and s.duration == 40.0
