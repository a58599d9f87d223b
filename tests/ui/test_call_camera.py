"""The Call page's camera on the fake camera (an MJPG file played in real time): off until the
user turns it on, only in a call; the preview follows the frames; the call's VideoFeed gets the
camera when the model sees images (else the caption says preview only); no camera → the button
says so and the call goes on; an error opening it is shown; hanging up turns it off."""

from __future__ import annotations

import time

import pytest
from test_call_page import FakeCall, Owner, settle, started

from desktop.call.video import VideoFeed
from desktop.errors import OmnideskError
from desktop.media.fake_camera import FakeCamera, write_test_video
from desktop.ui.call import CallPage


class VideoCall(FakeCall):
    def __init__(self, mode) -> None:
        super().__init__(mode)
        self.video = VideoFeed(rate_hz=1.0)


class Cameras:
    """What CallFactory offers the page for the camera, on a fake camera."""

    def __init__(self, path, problem=None, sees=True, fail=None) -> None:
        self.path, self.problem, self.sees, self.fail = path, problem, sees, fail
        self.opened: list[FakeCamera] = []

    def camera_status(self):
        return self.problem

    async def open_camera(self):
        if self.fail:
            raise OmnideskError(self.fail)
        cam = FakeCamera(self.path)
        cam.start()
        self.opened.append(cam)
        return cam

    def sees_images(self):
        return self.sees


class VideoOwner(Owner):
    async def start_call(self, mode):
        call = VideoCall(mode)
        self.calls.append(call)
        return call


@pytest.fixture
def video(tmp_path):
    return write_test_video(tmp_path / "cam.avi", seconds=1.0, fps=15, size=(320, 240))


def page_with(qtbot, owner, cameras) -> CallPage:
    page = CallPage(owner.start_call, owner.mic_status, cameras=cameras)
    qtbot.addWidget(page)
    page.resize(1000, 680)
    page.show()
    qtbot.waitExposed(page)
    return page


def test_camera_on_in_a_call_preview_and_frames_to_the_model(qtbot, aloop, video, screenshot):
    owner, cams = VideoOwner(), Cameras(video)
    page = page_with(qtbot, owner, cams)
    button = page.camera.button
    assert not button.isEnabled() and not page.camera.isVisible()  # no call: off, and cannot start
    call = started(aloop, page, owner)
    assert button.isEnabled() and not button.isChecked() and page.camera.caption.text() == "Camera off"
    button.click()
    settle(aloop, page)
    cam = cams.opened[-1]
    assert button.isChecked() and button.text() == "Camera on" and page.camera.isVisible()
    assert "the assistant sees a frame a second" in page.camera.caption.text()
    assert call.video.camera is cam and call.video.on and call.video.send
    qtbot.waitUntil(lambda: page.camera.preview.pixmap() is not None and not page.camera.preview.pixmap().isNull(), timeout=3000)
    first = page.camera._shown_index
    qtbot.waitUntil(lambda: page.camera._shown_index > first + 3, timeout=3000)  # it follows the camera
    call.video.tick(time.monotonic())
    assert call.video.take()[0][:2] == b"\xff\xd8"  # a JPEG for the user's turn
    screenshot(page, "call_camera_on")
    button.click()  # off again
    settle(aloop, page)
    assert not button.isChecked() and not page.camera.isVisible() and not call.video.on and call.video.camera is None
    from PySide6.QtTest import QTest
    from PySide6.QtCore import Qt

    page.setFocus()
    QTest.keyClick(page, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    settle(aloop, page)
    assert button.isChecked()  # Ctrl+Shift+C turned it on again
    page.end()
    settle(aloop, page)
    assert not page.camera.isVisible() and cams.opened[-1]._stop.is_set()  # hanging up closes it


def test_preview_only_when_the_model_cannot_see(qtbot, aloop, video):
    owner, cams = VideoOwner(), Cameras(video, sees=False)
    page = page_with(qtbot, owner, cams)
    call = started(aloop, page, owner)
    page.camera.button.click()
    settle(aloop, page)
    assert "preview only" in page.camera.caption.text() and call.video.on and not call.video.send
    page.end()
    settle(aloop, page)


def test_no_camera_says_so_and_an_open_error_is_shown(qtbot, aloop, video, screenshot):
    owner = VideoOwner()
    page = page_with(qtbot, owner, Cameras(video, problem="No camera found"))
    started(aloop, page, owner)
    button = page.camera.button
    assert not button.isEnabled() and button.text() == "No camera" and "call goes on with voice" in button.toolTip()
    screenshot(page, "call_no_camera")
    page.end()
    settle(aloop, page)
    page2 = page_with(qtbot, VideoOwner(), Cameras(video, fail="The camera could not be opened (is another app using it?)"))
    started(aloop, page2, page2._start_call.__self__)
    page2.camera.button.click()
    settle(aloop, page2)
    assert not page2.camera.button.isChecked() and "could not be opened" in page2.notice.text
    page2.end()
    settle(aloop, page2)
