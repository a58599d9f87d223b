"""Issue 19, item 12 (retention): a link named like a session folder (to a folder elsewhere) is never
followed: not counted, not deleted, nothing in its target touched, and no error logged each run; a
link inside a session folder is counted as itself, not as what it points to."""

from __future__ import annotations

import json
import logging
import os

import pytest

from desktop.recording import retention
from desktop.recording.retention import apply_retention, scan

pytestmark = pytest.mark.hardening
NOW = 1_800_000_000.0
DAY = 86400.0


def session(root, name, days_ago, size):
    folder = root / name
    (folder / "user_audio").mkdir(parents=True)
    started = NOW - days_ago * DAY
    (folder / "meta.json").write_text(json.dumps({"version": 1, "started_at": started, "ended_at": started + 60}))
    (folder / "user_audio" / "000001.wav").write_bytes(b"\0" * size)
    for f in [folder, *folder.rglob("*")]:
        os.utime(f, (started + 60, started + 60), follow_symlinks=False)
    return folder


def test_links_named_like_sessions_are_never_followed(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(retention, "_said_links", set(), raising=False)
    root, elsewhere = tmp_path / "recordings", tmp_path / "precious"
    root.mkdir()
    target = session(elsewhere, "20250101-100000-call-aaaaaaaa", 100, 5000)  # looks old and big
    (root / "20250101-100000-call-aaaaaaaa").symlink_to(target, target_is_directory=True)
    (root / "20250102-100000-call-bbbbbbbb").symlink_to(tmp_path / "gone")  # dangling
    real = session(root, "20250103-100000-call-cccccccc", 50, 100)
    (real / "user_audio" / "big.wav").symlink_to(target / "user_audio" / "000001.wav")

    assert [s.path for s in scan(root)] == [real]
    assert scan(root)[0].bytes < 1000  # the link inside is not counted as its target's 5000 bytes
    with caplog.at_level(logging.DEBUG, logger="desktop.recording"):
        for _run in range(3):
            freed = apply_retention(root, 30, 100, now=lambda: NOW, live=lambda: ())
            assert freed.errors == []
    assert freed.by_age == [] and not real.exists()  # the real old one went on the first run
    assert (target / "user_audio" / "000001.wav").stat().st_size == 5000  # the link's target is untouched
    assert (root / "20250101-100000-call-aaaaaaaa").is_symlink()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len([r for r in caplog.records if "link" in r.getMessage()]) <= 1  # at most one line, ever
