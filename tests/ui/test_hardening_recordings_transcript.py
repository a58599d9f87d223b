"""Issue 19: item 12 (a 200,000-line chat recording took 4.5 s on the UI thread to show: the transcript
held every turn) and new-user item 6 (a chat recording flattened the reply's Markdown into one line).
The transcript holds a bounded window of turns around the current one; a reply shows its Markdown."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QUrl

from desktop.recording.reader import open_recording
from desktop.ui.recordings.viewer import Viewer

pytestmark = pytest.mark.hardening
REPLY = "Here is a plan:\n\n1. **Pack** light\n2. Book the *train*\n\nLine one\nLine two\n\n```\ncode = 1\n```\n![map](file:///etc/passwd)"


def chat(folder, turns: int, reply: str = "fine") -> None:
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"version": 1, "type": "chat", "started_at": 1.7e9,
                                                  "ended_at": 1.7e9 + turns * 2.0 + 1}))
    with (folder / "timeline.jsonl").open("w", encoding="utf-8") as f:
        for turn in range(1, turns + 1):
            f.write(json.dumps({"t": turn * 2.0, "kind": "user_text", "text": f"question {turn}", "turn": turn}) + "\n")
            f.write(json.dumps({"t": turn * 2.0 + 1, "kind": "assistant_text", "text": f"{reply} {turn}", "turn": turn}) + "\n")


def viewer_for(qtbot, folder) -> Viewer:
    viewer = Viewer()
    qtbot.addWidget(viewer)
    viewer.resize(1000, 640)
    viewer.show()
    viewer.show_recording(open_recording(folder))
    return viewer


def test_a_long_chat_puts_a_bounded_window_in_the_transcript(qtbot, tmp_path, screenshot):
    folder = tmp_path / "20261125-100000-chat-000000aa"
    chat(folder, 5000, "answer " * 20)
    viewer = viewer_for(qtbot, folder)
    doc = viewer.transcript.document()
    text = viewer.transcript.toPlainText()
    assert "question 1\n" in text + "\n" and "question 4000" not in text
    assert doc.characterCount() < 60_000  # held every turn before: ~800,000 characters
    assert "Later turns" in text
    viewer.seek(8000.5)  # turn 4000
    text = viewer.transcript.toPlainText()
    assert "question 4000" in text and "question 1\n" not in text and "Earlier turns" in text
    assert viewer.transcript.document().characterCount() < 60_000
    qtbot.wait(50)
    screenshot(viewer, "recording_long_chat")
    first = viewer.transcript.first
    viewer.transcript._clicked(QUrl(f"turns:{viewer.transcript.last}"))  # "Later turns ›"
    assert viewer.transcript.first > first


def test_a_reply_shows_its_markdown_not_one_line(qtbot, tmp_path, screenshot):
    folder = tmp_path / "20261125-100000-chat-000000bb"
    chat(folder, 2, REPLY)
    viewer = viewer_for(qtbot, folder)
    text = viewer.transcript.toPlainText()
    lines = [line.strip() for line in text.splitlines()]
    assert "Line one" in lines and "Line two 1" not in lines  # each line of the paragraph kept
    assert any(line.endswith("Pack light") for line in lines) and "code = 1" in lines
    html = viewer.transcript.toHtml()
    assert "font-weight:700" in html or "font-weight:600" in html  # **Pack** is bold
    assert "/etc/passwd" not in html and "[image: map]" in text  # an image is never loaded
    qtbot.wait(50)
    screenshot(viewer, "recording_markdown_reply")
