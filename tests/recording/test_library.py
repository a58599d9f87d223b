"""Listing, deleting and exporting recording folders."""

from __future__ import annotations

import zipfile

import pytest

from recording_samples import sample_call, sample_chat
from desktop.errors import OmnideskError
from desktop.recording.library import delete, export_zip, scan


def test_scan_summaries_newest_first(tmp_path):
    old = sample_chat(tmp_path, started_at=1_700_000_000.0)
    new = sample_call(tmp_path, started_at=1_700_100_000.0, title="Standup", first_words="good morning")
    crashed = sample_call(tmp_path, started_at=1_700_200_000.0, finish=False)
    crashed.crash()
    (tmp_path / "not-a-recording").mkdir()
    (tmp_path / "stray.txt").write_text("x")
    rows = scan(tmp_path)
    assert [r.folder for r in rows] == [crashed.folder, new.folder, old.folder]
    c, n, o = rows
    assert (n.kind, n.title, n.first_words, n.duration, n.complete, n.video) == ("call", "Standup", "good morning",
                                                                                6.0, True, True)
    assert (o.kind, o.duration, o.title) == ("chat", 40.0, "Trip planning")
    assert not c.complete and c.duration == pytest.approx(5.5)
    assert n.size == sum(p.stat().st_size for p in new.folder.rglob("*") if p.is_file()) > 50_000
    assert scan(tmp_path / "missing") == []


def test_live_recordings_are_told_from_cut_short_ones(tmp_path):
    """Only the recorder knows which unfinished folders it is writing: those are live, any other
    unfinished one was cut short (even one written a moment ago), a finished one is neither."""
    going = sample_call(tmp_path, started_at=1_700_000_000.0, finish=False)
    cut = sample_call(tmp_path, started_at=1_700_100_000.0, finish=False)
    cut.crash()
    done = sample_chat(tmp_path, started_at=1_700_200_000.0)
    rows = {r.folder: r for r in scan(tmp_path, live=[going.folder, done.folder])}
    assert (rows[going.folder].live, rows[going.folder].complete) == (True, False)
    assert rows[going.folder].duration == pytest.approx(5.5)  # what is recorded so far
    assert (rows[cut.folder].live, rows[cut.folder].complete) == (False, False)
    assert (rows[done.folder].live, rows[done.folder].complete) == (False, True)  # its end is written
    assert not any(r.live for r in scan(tmp_path))  # nothing open: every unfinished one was cut short


def test_delete_only_recordings_inside_the_root(tmp_path):
    root = tmp_path / "recordings"
    rec = sample_chat(root)
    other = sample_chat(tmp_path / "elsewhere")
    (root / "plain").mkdir()
    for bad in (other.folder, root / "plain", root, root / "missing"):
        with pytest.raises(OmnideskError):
            delete(root, bad)
    assert other.folder.exists()
    delete(root, rec.folder)
    assert not rec.folder.exists() and scan(root) == []


def test_export_zip_has_every_file_but_part_files(tmp_path):
    rec = sample_call(tmp_path / "rec")
    (rec.folder / "user_audio" / "000009.wav.part").write_bytes(b"half")
    dest = export_zip(rec.folder, tmp_path / "out.zip")
    with zipfile.ZipFile(dest) as z:
        names = set(z.namelist())
        assert z.read(f"{rec.folder.name}/meta.json") == (rec.folder / "meta.json").read_bytes()
    expected = {f"{rec.folder.name}/{p.relative_to(rec.folder).as_posix()}" for p in rec.folder.rglob("*")
                if p.is_file() and not p.name.endswith(".part")}
    assert names == expected and f"{rec.folder.name}/user_frames/000001.jpg" in names
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    with pytest.raises(OmnideskError, match="Could not export"):
        export_zip(rec.folder, tmp_path / "no" / "such" / "dir.zip")
