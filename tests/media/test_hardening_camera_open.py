"""Issue 19, item 4 (the camera): a camera path that is a pipe is refused by its kind, never
opened; an open that never returns (a stuck V4L2 driver) is given up after the open timeout; a
close (the app quitting) while an open hangs returns at once and so does the waiting start()."""

from __future__ import annotations

import os
import threading
import time

import pytest

from desktop.media.camera import Camera, CameraUnavailable, camera_problem

pytestmark = [pytest.mark.hardening, pytest.mark.timeout(120)]


def in_thread(fn, timeout: float):
    """(finished within `timeout`, what fn returned or raised, seconds it took)."""
    out: list = []
    started = time.monotonic()

    def run():
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return (not t.is_alive()), (out[0] if out else None), time.monotonic() - started


class Stuck:
    """A capture factory whose open never returns until `release` (a hung driver); a capture that
    opens late is released by the camera."""

    def __init__(self) -> None:
        self.release, self.calls, self.released = threading.Event(), 0, threading.Event()

    def __call__(self, device):
        self.calls += 1
        self.release.wait()
        return Opened(self.released)


class Opened:
    def __init__(self, released: threading.Event) -> None:
        self._released = released

    def isOpened(self) -> bool:
        return True

    def set(self, *_):
        return True

    def release(self) -> None:
        self._released.set()


def test_a_fifo_as_the_camera_device_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "video0"
    os.mkfifo(fifo)
    try:
        assert "not a camera or a video file" in (camera_problem(str(fifo)) or "")
        done, result, _ = in_thread(lambda: Camera(str(fifo)).start(), timeout=20)
    finally:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # ends a reader blocked on it (old code)
        except OSError:
            pass
    assert done, "Camera.start blocked on a pipe"
    assert isinstance(result, CameraUnavailable) and "not a camera or a video file" in str(result)


def test_a_camera_whose_open_never_returns_is_given_up():
    stuck = Stuck()
    cam = Camera(0, capture=stuck)
    cam.open_timeout_s = 0.5
    done, result, took = in_thread(cam.start, timeout=20)
    assert done and isinstance(result, CameraUnavailable) and "did not answer" in str(result)
    assert took < 10
    stuck.release.set()  # the driver answers at last: the late capture is released, not leaked
    assert stuck.released.wait(5)
    cam.close()


def test_quitting_while_a_camera_open_hangs_returns_promptly():
    stuck = Stuck()
    cam = Camera(0, capture=stuck)  # the default open timeout (5 s): the close must not wait for it
    starting = threading.Thread(target=lambda: pytest.raises(CameraUnavailable, cam.start), daemon=True)
    starting.start()
    deadline = time.monotonic() + 10
    while stuck.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stuck.calls == 1
    done, _, took = in_thread(cam.close, timeout=10)
    assert done and took < 2.0
    starting.join(2.0)
    assert not starting.is_alive(), "start() still waits for the stuck open after close()"
    stuck.release.set()
    assert stuck.released.wait(5)
