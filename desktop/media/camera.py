"""The camera for video calls: an OpenCV `VideoCapture` (the headless build: the plain one ships Qt
plugins that clash with PySide6) read on a thread of its own, keeping only the newest frame. The
same class plays a video file paced by a Clock (the fake camera of tests and benchmarks)."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from desktop.media.clock import Clock, RealClock

log = logging.getLogger(__name__)
os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")  # a missing camera is reported by us, not by cv2

OPEN_TIMEOUT_S = 5.0


class CameraUnavailable(Exception):
    """No camera, or it cannot be opened or read: `str(exc)` says so for the page."""


@dataclass(frozen=True, slots=True)
class VideoFrame:
    image: np.ndarray  # H×W×3 uint8, BGR (OpenCV's order)
    t: float  # clock time it was captured
    index: int  # frames delivered before it

    def jpeg(self, quality: int = 85, max_side: int = 0) -> bytes:
        """The frame as JPEG bytes, scaled down so that its longer side is at most `max_side`."""
        import cv2

        image = self.image
        side = max(image.shape[:2])
        if max_side and side > max_side:
            scale = max_side / side
            image = cv2.resize(image, (round(image.shape[1] * scale), round(image.shape[0] * scale)),
                               interpolation=cv2.INTER_AREA)  # fmt: skip
        ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
        if not ok:
            raise ValueError("the frame could not be encoded as JPEG")
        return buf.tobytes()


def camera_problem(device: int | str | None = None) -> str | None:
    """None when a camera seems present, else why not (without opening it: that can take seconds
    and turns its light on). On Linux a camera is a /dev/video* node."""
    if isinstance(device, str) and not device.isdigit():
        return None if Path(device).exists() else f"Camera {device!r} was not found"
    if os.name == "posix" and Path("/dev").is_dir() and not any(Path("/dev").glob("video*")):
        return "No camera found"
    return None


class Camera:
    """`start()` opens the device (an index, a device path, or a video file) and reads it on a
    thread; `latest()` is the newest frame (None before the first). A file (`paced`) plays at its
    own frame rate on `clock` and loops, like a camera that never stops. `delivered` counts the
    frames read; `fps()` is their rate since start. `close()` releases the device."""

    def __init__(self, device: int | str = 0, *, clock: Clock | None = None, width: int = 640, height: int = 480,
                 fps: float = 15.0, paced: bool | None = None, capture: Any = None) -> None:  # fmt: skip
        self.device, self.clock = device, clock or RealClock()
        self.width, self.height, self.fps_wanted = width, height, fps
        self.paced = paced if paced is not None else isinstance(device, str) and Path(device).is_file()
        self._capture_factory = capture  # tests: a stand-in for cv2.VideoCapture
        self._cap: Any = None
        self._latest: VideoFrame | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.delivered = 0
        self.error: str | None = None  # why reading stopped, if it did
        self._t0 = 0.0

    def start(self) -> None:
        import cv2

        factory = self._capture_factory or cv2.VideoCapture
        device = int(self.device) if isinstance(self.device, str) and self.device.isdigit() else self.device
        cap = factory(device)
        if not cap.isOpened():
            cap.release()
            raise CameraUnavailable(f"The camera {self.device!r} could not be opened" if device != 0
                                    else "The camera could not be opened (is another app using it?)")  # fmt: skip
        if not self.paced:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, self.width)
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, self.height)
            cap.set(cv2.CAP_PROP_FPS, self.fps_wanted)
        else:
            rate = cap.get(cv2.CAP_PROP_FPS)
            self.fps_wanted = rate if rate and rate > 0 else self.fps_wanted
        self._cap, self._t0 = cap, self.clock.now()
        self._thread = threading.Thread(target=self._run, name="camera", daemon=True)
        self._thread.start()

    def latest(self) -> VideoFrame | None:
        with self._lock:
            return self._latest

    def fps(self) -> float:
        """Frames delivered per second of clock time since start."""
        elapsed = self.clock.now() - self._t0
        return self.delivered / elapsed if elapsed > 0 else 0.0

    def _run(self) -> None:
        try:
            self._read_loop()
        finally:
            cap, self._cap = self._cap, None  # released by the reading thread: never mid-read
            if cap is not None:
                cap.release()

    def _read_loop(self) -> None:
        period = 1.0 / self.fps_wanted
        due = self.clock.now()
        while not self._stop.is_set():
            ok, image = self._cap.read()
            if not ok and self.paced:  # the end of the file: play it again
                import cv2

                self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
                ok, image = self._cap.read()
            if not ok:
                self.error = "The camera stopped sending pictures"
                log.warning("%s (%s)", self.error, self.device)
                return
            if self.paced:  # a file: deliver each frame at its time
                self.clock.sleep(due - self.clock.now())
                due += period
            frame = VideoFrame(image, self.clock.now(), self.delivered)
            with self._lock:
                self._latest = frame
            self.delivered += 1

    def close(self) -> None:
        """Stop reading; the device is released by the reading thread as it ends (a thread asleep
        on a manual VirtualClock ends at its next wake-up)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)
