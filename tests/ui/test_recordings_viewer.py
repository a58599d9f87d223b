"""The recording viewer (offscreen) on recordings written by the spec: a video call with both
voices, frames and a barge-in; a chat; a crashed recording and a live one;
nothing to play (Play off, says why); keys; playback on a virtual clock
through the fake speaker with the transcript highlight and the frame following."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from recording_samples import sample_call, sample_chat
from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.ui.recordings import RecordingsPage


@pytest.fixture
def clock():
    return VirtualClock(100.0)


def open_in_page(qtbot, folder, clock, speaker=None):
    page = RecordingsPage(lambda: folder.parent, lambda: speaker, clock=clock)
    qtbot.addWidget(page)
    page.resize(1100, 720)
    page.show()
    qtbot.waitExposed(page)
    page.open(folder)
    qtbot.waitUntil(lambda: page.currentWidget() is page.viewer)
    return page, page.viewer


def test_video_call_opens_with_everything(qtbot, tmp_path, clock, screenshot):
    rec = sample_call(tmp_path, title="Standup")
    page, viewer = open_in_page(qtbot, rec.folder, clock)
    assert viewer.title.text() == "Standup" and "2 turns" in viewer.info.text() and "1 barge-in" in viewer.info.text()
    assert not viewer.notice.isVisible()
    for lane in (viewer.user_lane, viewer.ai_lane, viewer.film, viewer.frame, viewer.turn_lane):
        assert lane.isVisible()
    assert viewer.ai_lane.marks == [3.2] and viewer.user_lane.marks == [3.2]
    ahead, played = viewer.ai_lane.pictures()
    image = ahead.toImage()
    # the reply's waveform spans 2.0–3.2 s and 4.5–5.5 s of 6 s: ink there, none at 1 s
    def ink(t: float) -> int:
        x = int(viewer.ai_lane.x_of(t) - viewer.ai_lane.x_of(0))
        return sum(image.pixelColor(x, y).alpha() > 0 for y in range(image.height()))
    assert ink(2.5) > 20 and ink(1.0) <= 2  # silence: the centre line only
    html = viewer.transcript.toHtml()
    assert "interrupted" in html and "412 ms to first sound" in html and "What time is it".lower() in html.lower()
    assert len(viewer.film.slots()) >= 6
    assert not viewer.replay_button.isVisible()  # no replay.mp4 built
    viewer.seek(2.6)
    screenshot(page, "recording_viewer_call")
    assert viewer.frame.path.name == "000003.jpg"


def test_keys_move_the_position(qtbot, tmp_path, clock):
    rec = sample_chat(tmp_path)
    page, viewer = open_in_page(qtbot, rec.folder, clock)
    page.window().activateWindow()
    assert QTest.qWaitForWindowActive(page.window())
    viewer.transcript.setFocus()  # keys work wherever the focus is inside the viewer
    QTest.keyClick(viewer.transcript, Qt.Key.Key_Right)
    assert viewer.position == 5.0
    QTest.keyClick(viewer.transcript, Qt.Key.Key_Right)
    QTest.keyClick(viewer.transcript, Qt.Key.Key_Left)
    assert viewer.position == 5.0
    QTest.keyClick(viewer.transcript, Qt.Key.Key_End)
    assert viewer.position == 40.0 and viewer.transport.slider.value() == 400
    QTest.keyClick(viewer.transcript, Qt.Key.Key_Home)
    assert viewer.position == 0.0
    QTest.keyClick(viewer.transcript, Qt.Key.Key_Space)
    assert viewer.player.playing
    clock.advance(13.0)
    viewer.tick()
    assert viewer.position == 13.0 and viewer.turn_lane.current == 0
    QTest.keyClick(viewer.transcript, Qt.Key.Key_Space)
    assert not viewer.player.playing
    QTest.keyClick(viewer.transcript, Qt.Key.Key_Escape)
    assert page.currentWidget() is page.list


def test_playback_sound_highlight_and_frame_follow(qtbot, tmp_path, clock):
    rec = sample_call(tmp_path)
    speaker = FakeAudioOutput(clock, device_rate=22050, pre_roll_ms=20)
    speaker.start()
    page, viewer = open_in_page(qtbot, rec.folder, clock, speaker)
    viewer.seek(1.0)
    viewer.toggle()
    assert viewer.player.playing and viewer.timer.isActive()
    seen = []
    for _ in range(60):  # 1.0 → 4.0 s in 50 ms steps of virtual time
        clock.advance(0.05)
        viewer.tick()
        speaker.pump()
        seen.append((round(viewer.position, 2), viewer.transcript.current, viewer.frame.path.name))
    assert seen[-1] == (4.0, 0, "000005.jpg")
    assert (2.0, 0, "000003.jpg") in seen
    viewer.seek(4.4)
    assert viewer.transcript.current == 1 and viewer.turn_lane.current == 1
    cells = viewer.transcript.toHtml().split("<td")[1:]
    assert ["bgcolor" in c.split(">", 1)[0] for c in cells] == [False, True]  # turn 2 highlighted
    played = speaker.played()
    # what the speaker played is the recording: the reply's tone 2.0–3.2 s heard ≈1 s in
    loud = np.abs(played[int(1.2 * 22050):int(2.0 * 22050)])
    assert loud.max() > 0.3 and np.abs(played[: int(0.9 * 22050)]).max() > 0.3  # the user's voice
    viewer.set_speed(2.0)
    clock.advance(0.5)
    viewer.tick()
    assert viewer.position == pytest.approx(5.4) and viewer.transport.speed.currentText() == "2×"
    clock.advance(1.0)
    viewer.tick()
    assert viewer.position == 6.0 and not viewer.player.playing and not viewer.timer.isActive()
    speaker.close()


def test_chat_recording_is_a_text_timeline(qtbot, tmp_path, clock, screenshot):
    rec = sample_chat(tmp_path)
    page, viewer = open_in_page(qtbot, rec.folder, clock)
    assert viewer.turn_lane.isVisible() and len(viewer.turn_lane.turns) == 3
    for lane in (viewer.user_lane, viewer.ai_lane, viewer.film, viewer.frame):
        assert not lane.isVisible()
    assert viewer.player.mix is None and viewer.player.duration == 40.0
    assert viewer.transcript.toHtml().count("<img") == 1  # the image attached to turn 1
    x = viewer.turn_lane.x_of(25.0)
    QTest.mouseClick(viewer.turn_lane, Qt.MouseButton.LeftButton, pos=viewer.turn_lane.rect().center().__class__(int(x), 10))
    assert viewer.position == pytest.approx(25.0, abs=0.2) and viewer.transcript.current == 1
    screenshot(page, "recording_viewer_chat")


def test_replay_video_opens_in_the_desktop_player(qtbot, tmp_path, clock, monkeypatch):
    rec = sample_call(tmp_path)
    (rec.folder / "replay.mp4").write_bytes(b"\0" * 64)
    rec.meta["replay"] = {"audio": None, "video": "replay.mp4"}
    rec._write_meta()
    opened = []
    monkeypatch.setattr("desktop.ui.recordings.viewer.QDesktopServices.openUrl", lambda url: opened.append(url) or True)
    page, viewer = open_in_page(qtbot, rec.folder, clock)
    assert viewer.replay_button.isVisible()
    viewer.replay_button.click()
    assert [u.toLocalFile() for u in opened] == [str(rec.folder / "replay.mp4")]


def test_crashed_recording_opens(qtbot, tmp_path, clock, screenshot):
    rec = sample_call(tmp_path, finish=False)
    (rec.folder / "ai_audio" / "000003.wav.part").write_bytes(b"RIFF")
    rec.crash()  # written just now, but no recorder of this app has it open: cut short
    page, viewer = open_in_page(qtbot, rec.folder, clock)
    assert "did not end normally" in viewer.notice.text() and "cut short" in viewer.notice.text()
    assert "still going on" not in viewer.notice.text() and not viewer.live
    assert len(viewer.transcript.turns) == 2 and viewer.player.duration == pytest.approx(5.5)
    screenshot(page, "recording_viewer_crashed")


def test_a_live_recording_opens_as_going_on(qtbot, tmp_path, clock):
    rec = sample_call(tmp_path, finish=False)
    rec.crash()  # a line being written looks the same as a torn one
    live = {rec.folder}
    page = RecordingsPage(lambda: tmp_path, live=lambda: live, clock=clock)
    qtbot.addWidget(page)
    page.show()
    page.open(rec.folder)
    qtbot.waitUntil(lambda: page.currentWidget() is page.viewer)
    viewer = page.viewer
    assert viewer.live and "still going on" in viewer.notice.text()
    assert "cut short" not in viewer.notice.text()  # a line being written is no problem while it goes on
    assert viewer.transport.play.isEnabled()  # 5.5 s recorded so far: playable


def test_nothing_to_play_keeps_play_off(qtbot, tmp_path, clock, screenshot):
    """A live chat with under a second recorded (it reads 0:00, no sound) and the same one cut
    short: Play is off and says why; Space says it in the status bar instead of jumping to 0:00."""
    rec = sample_chat(tmp_path, title="Just started")
    (rec.folder / "timeline.jsonl").write_text('{"t": 0.0, "kind": "user_text", "text": "hi", "turn": 1}\n'
                                               '{"t": 0.4, "kind": "assistant_delta", "text": "Hel", "turn": 1}\n')
    rec.meta["ended_at"] = None
    rec._write_meta()
    live = {rec.folder}
    page = RecordingsPage(lambda: tmp_path, live=lambda: live, clock=clock)
    qtbot.addWidget(page)
    page.resize(900, 500)
    page.show()
    messages: list[str] = []
    page.status.connect(messages.append)
    page.open(rec.folder)
    qtbot.waitUntil(lambda: page.currentWidget() is page.viewer)
    viewer = page.viewer
    transport = viewer.transport
    assert viewer.player.duration == pytest.approx(0.4) and not viewer.playable  # reads 0:00: no sound to play
    assert not transport.play.isEnabled() and not transport.slider.isEnabled()
    assert transport.time.text() == "Nothing recorded to play yet" == transport.play.toolTip()
    screenshot(page, "recording_viewer_nothing_yet")
    QTest.keyClick(viewer, Qt.Key.Key_Space)
    assert messages[-1] == "Nothing recorded to play yet." and not viewer.player.playing
    assert transport.time.text() == "Nothing recorded to play yet"  # not "0:00 / 0:00"

    live.clear()  # the same folder with no recorder: an empty recording cut short
    page.show_list()
    page.open(rec.folder)
    qtbot.waitUntil(lambda: page.opening is None and not viewer.live)
    assert transport.time.text() == "Nothing to play in this recording" and not transport.play.isEnabled()

    full = sample_call(tmp_path)
    page.show_list()
    page.open(full.folder)
    qtbot.waitUntil(lambda: page.opening is None and viewer.player.duration > 0)
    assert transport.play.isEnabled() and transport.slider.isEnabled() and transport.time.text() == "0:00 / 0:06"


def test_a_folder_that_is_not_a_recording_says_so(qtbot, tmp_path, clock):
    page = RecordingsPage(lambda: tmp_path, clock=clock)
    qtbot.addWidget(page)
    messages: list[str] = []
    page.status.connect(messages.append)
    (tmp_path / "empty").mkdir()
    page.open(tmp_path / "empty")
    qtbot.waitUntil(lambda: page.opening is None)
    assert page.currentWidget() is page.list and "is not a recording" in messages[-1]


def test_zoom_and_follow(qtbot, tmp_path, clock, screenshot):
    from PySide6.QtCore import QPoint, QPointF
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    rec = sample_call(tmp_path)
    page, viewer = open_in_page(qtbot, rec.folder, clock)
    assert viewer.view == (0.0, 6.0)
    lane = viewer.ai_lane
    x = lane.x_of(2.5)
    wheel = QWheelEvent(QPointF(x, 10), QPointF(lane.mapToGlobal(QPoint(int(x), 10))), QPoint(), QPoint(0, 240),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.ControlModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(lane, wheel)  # Ctrl+wheel: two steps in, around 2.5 s
    v0, v1 = viewer.view
    assert v1 - v0 == pytest.approx(6 / 2.25) and lane.t_of(x) == pytest.approx(2.5)
    assert all(l.view == (v0, v1) for l in viewer.lanes)
    _, played = lane.pictures()  # zoomed in: the reply starts at 2.0 s, well inside the view
    image = played.toImage()
    col = int(lane.x_of(2.3) - lane.x_of(v0))
    assert sum(image.pixelColor(col, y).alpha() > 0 for y in range(image.height())) > 20
    screenshot(page, "recording_viewer_zoomed")
    viewer.seek(5.9)  # outside the view: the view pages to it
    assert viewer.view[0] <= 5.9 <= viewer.view[1]
    viewer.zoom_at(1 / 10)
    assert viewer.view == (0.0, 6.0)
    viewer.zoom_at(100)
    assert viewer.view[1] - viewer.view[0] == pytest.approx(2.0)  # at most 2 s across
