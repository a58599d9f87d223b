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


def test_a_reply_stopped_by_hanging_up_is_not_shown_as_interrupted(qtbot, tmp_path, screenshot):
    """New-user item 6: hanging up is not a barge-in: no red mark on the lanes, not counted."""
    folder = tmp_path / "20261125-100000-call-000000cc"
    folder.mkdir()
    (folder / "meta.json").write_text(json.dumps({"version": 1, "type": "call", "started_at": 1.7e9, "ended_at": 1.7e9 + 9}))
    lines = [{"t": 1.0, "kind": "user_text", "text": "Tell me a story.", "turn": 1},
             {"t": 3.0, "kind": "barge_in", "turn": 1, "heard": "Once upon"},
             {"t": 3.1, "kind": "assistant_text", "text": "Once upon a time.", "turn": 1, "heard": "Once upon"},
             {"t": 4.0, "kind": "user_text", "text": "Another one.", "turn": 2},
             {"t": 6.0, "kind": "reply_stopped", "turn": 2, "heard": "A dragon", "reason": "ended"},
             {"t": 6.1, "kind": "assistant_text", "text": "A dragon lived here.", "turn": 2, "heard": "A dragon"},
             {"t": 9.0, "kind": "end"}]
    (folder / "timeline.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    viewer = viewer_for(qtbot, folder)
    text = viewer.transcript.toPlainText()
    assert text.count("interrupted") == 1 and "the call ended" in text
    assert "1 barge-in" in viewer.info.text() and "barge-ins" not in viewer.info.text()
    assert viewer.ai_lane.marks == [3.0]
    qtbot.wait(50)
    screenshot(viewer, "recording_hung_up")
