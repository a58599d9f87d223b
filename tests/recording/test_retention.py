"""Retention by age and by total size (oldest first), on session folders with made-up start times
and sizes: a live session and anything not named like a session are never touched."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from desktop.recording.retention import GB, apply_retention, scan

NOW = 1_800_000_000.0
DAY = 86400.0


def session(root: Path, name: str, days_ago: float, size: int, *, ended: bool = True, touched: float | None = None) -> Path:
    folder = root / name
    (folder / "user_audio").mkdir(parents=True)
    started = NOW - days_ago * DAY
    (folder / "meta.json").write_text(json.dumps({"version": 1, "started_at": started,
                                                  "ended_at": started + 60 if ended else None}))
    (folder / "user_audio" / "000001.wav").write_bytes(b"\0" * size)
    stamp = touched if touched is not None else started + 60
    for f in folder.rglob("*"):
        os.utime(f, (stamp, stamp))
    return folder


def test_old_sessions_go_but_a_live_or_fresh_one_stays(tmp_path):
    old = session(tmp_path, "20250101-100000-call-aaaaaaaa", 40, 1000)
    older_live = session(tmp_path, "20250101-090000-call-bbbbbbbb", 41, 1000)
    crashed_long_ago = session(tmp_path, "20250101-080000-chat-cccccccc", 42, 1000, ended=False)
    other_app_live = session(tmp_path, "20250101-070000-call-dddddddd", 43, 1000, ended=False, touched=NOW - 30)
    young = session(tmp_path, "20250301-100000-call-eeeeeeee", 2, 1000)
    stranger = tmp_path / "my notes"
    stranger.mkdir()
    (stranger / "keep.txt").write_text("x")
    os.utime(stranger, (NOW - 400 * DAY, NOW - 400 * DAY))

    freed = apply_retention(tmp_path, 30, 5.0, now=lambda: NOW, live=lambda: {older_live})
    assert sorted(freed.by_age) == sorted([old.name, crashed_long_ago.name]) and freed.by_size == []
    assert freed.bytes >= 2000 and freed.kept == 3
    assert not old.exists() and not crashed_long_ago.exists()
    assert older_live.exists() and other_app_live.exists() and young.exists() and (stranger / "keep.txt").exists()
    assert "older than 30 days" in freed.message(30, 5.0) and "freed 2.1 KB" in freed.message(30, 5.0)


def test_over_the_size_limit_the_oldest_go_first(tmp_path):
    mb = 1_000_000
    a = session(tmp_path, "20250301-100000-call-aaaaaaaa", 5, 3 * mb)
    b = session(tmp_path, "20250302-100000-call-bbbbbbbb", 4, 3 * mb)
    live = session(tmp_path, "20250303-100000-call-cccccccc", 3, 3 * mb, ended=False, touched=NOW)
    d = session(tmp_path, "20250304-100000-chat-dddddddd", 2, 3 * mb)
    e = session(tmp_path, "20250305-100000-call-eeeeeeee", 1, 3 * mb)
    assert [s.path for s in scan(tmp_path)] == [a, b, live, d, e]

    freed = apply_retention(tmp_path, 30, 9.5 * mb / GB, now=lambda: NOW, live=set)
    assert freed.by_age == [] and freed.by_size == [a.name, b.name]  # 15 MB → 9 MB: two oldest
    assert freed.kept_bytes <= 9.1 * mb and freed.kept == 3
    assert "to stay under 0.0095 GB" in freed.message(30, 0.0095)

    freed = apply_retention(tmp_path, 30, 1 * mb / GB, now=lambda: NOW, live=set)
    assert freed.by_size == [d.name, e.name] and live.exists()  # a live session stays, even over the limit


def test_nothing_to_do_says_so(tmp_path):
    session(tmp_path, "20250305-100000-call-eeeeeeee", 1, 10)
    freed = apply_retention(tmp_path, 30, 5.0, now=lambda: NOW, live=set)
    assert freed.count == 0 and "nothing to clean up" in freed.message(30, 5.0)
    assert apply_retention(tmp_path / "missing", 30, 5.0).count == 0


def test_real_time_defaults_keep_todays_sessions(tmp_path):
    folder = tmp_path / time.strftime("%Y%m%d-%H%M%S-call-abcdef12")
    folder.mkdir()
    assert apply_retention(tmp_path, 1, 5.0).count == 0 and folder.exists()
