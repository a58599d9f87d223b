"""The camera: a video file played as a camera on a clock (the fake camera), frames kept newest
only, JPEG for the model, a camera that cannot open or stops, and the call's frame sampling."""

from __future__ import annotations

import time

import numpy as np
import pytest

from desktop.call.video import VideoFeed, user_content
from desktop.media.camera import Camera, CameraUnavailable, VideoFrame, camera_problem
from desktop.media.clock import ClockMode, RealClock, VirtualClock
from desktop.media.fake_camera import FakeCamera, write_test_video


def wait_for(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_fake_camera_plays_its_file_at_its_rate_and_loops(tmp_path):
    path = write_test_video(tmp_path / "cam.avi", seconds=1.0, fps=15)
    clock = VirtualClock(mode=ClockMode.COMPUTE)  # pacing sleeps cost nothing
    cam = FakeCamera(path, clock)
    cam.start()
    wait_for(lambda: cam.delivered >= 40)  # more than the file's 15 frames: it looped
    cam.close()
    assert cam.fps() == pytest.approx(15.0, rel=0.1)
    frame = cam.latest()
    assert frame is not None and frame.image.shape == (240, 320, 3) and frame.image.dtype == np.uint8
    assert cam.error is None


def test_real_time_delivery_keeps_the_newest_frame(tmp_path):
    path = write_test_video(tmp_path / "cam.avi", seconds=0.5, fps=20)
    cam = FakeCamera(path, RealClock())
    cam.start()
    time.sleep(0.6)
    first = cam.latest()
    time.sleep(0.2)
    second = cam.latest()
    cam.close()
    assert first is not None and second is not None and second.index > first.index
    assert 0.8 * 20 <= cam.fps() * 1.0 <= 1.2 * 20


def test_jpeg_scaled_for_the_model():
    image = np.zeros((480, 640, 3), np.uint8)
    image[:, :320] = 255
    data = VideoFrame(image, 0.0, 0).jpeg(max_side=320)
    import cv2

    back = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert data[:2] == b"\xff\xd8" and back.shape == (240, 320, 3)
    assert back[:, :150].mean() > 240 and back[:, 170:].mean() < 15


def test_a_camera_that_cannot_open_or_stops_says_so():
    class Closed:
        def isOpened(self):
            return False

        def release(self):
            pass

    with pytest.raises(CameraUnavailable, match="could not be opened"):
        Camera(0, capture=lambda device: Closed()).start()

    class Dies:
        def __init__(self):
            self.n = 0

        def isOpened(self):
            return True

        def set(self, *a):
            return True

        def read(self):
            self.n += 1
            return (self.n < 3, np.zeros((4, 4, 3), np.uint8))

        def release(self):
            self.released = True

    dies = Dies()
    cam = Camera(0, capture=lambda device: dies)
    cam.start()
    wait_for(lambda: cam.error is not None)
    assert "stopped" in cam.error and cam.delivered == 2
    wait_for(lambda: getattr(dies, "released", False))
    cam.close()
    assert camera_problem("/no/such/camera") == "Camera '/no/such/camera' was not found"


class StillCamera:
    def __init__(self):
        self.index = -1

    def latest(self):
        self.index += 1
        return VideoFrame(np.full((48, 64, 3), self.index % 255, np.uint8), 0.0, self.index)


def test_the_call_takes_a_frame_per_second_while_on_and_within_its_limit():
    feed = VideoFeed(StillCamera(), rate_hz=1.0, per_turn=2, max_in_context=3)
    for k in range(50):
        feed.tick(k * 0.1)  # off: nothing
    assert feed.take() == [] and feed.taken == 0
    feed.on = True
    for k in range(50):  # 5 s
        feed.tick(k * 0.1)
    assert feed.taken == 5
    frames = feed.take()
    assert len(frames) == 2 and all(f[:2] == b"\xff\xd8" for f in frames)  # the newest two
    for k in range(50, 80):
        feed.tick(k * 0.1)
    assert len(feed.take()) == 1 and feed.limit_hit  # 3 in context: the limit
    for k in range(80, 120):
        feed.tick(k * 0.1)
    assert feed.take() == []
    feed.on = False
    assert not feed.on
    seen: list = []
    quiet = VideoFeed(StillCamera(), rate_hz=2.0)
    quiet.on, quiet.send = True, False  # a model that cannot see: frames still sampled for taps
    quiet.taps.append(seen.append)
    for k in range(20):
        quiet.tick(k * 0.1)
    assert len(seen) == 4 and quiet.take() == []


def test_user_content_puts_the_frames_before_the_text():
    assert user_content("hi", []) == "hi"
    parts = user_content("what is this?", [b"a", b"b"])
    assert [p["type"] for p in parts] == ["image", "image", "text"] and parts[-1]["text"] == "what is this?"
