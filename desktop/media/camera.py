"""The camera for video calls: an OpenCV `VideoCapture` (the headless build: the plain one ships Qt
plugins that clash with PySide6) read on a thread of its own, keeping only the newest frame. The
same class plays a video file paced by a Clock (the fake camera of tests and benchmarks)."""

from __future__ import annotations

import logging
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from desktop.media.clock import Clock, RealClock

log = logging.getLogger(__name__)
os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")  # a missing camera is reported by us, not by cv2

OPEN_TIMEOUT_S = 5.0  # a camera that has not opened by then is stuck (a hung V4L2 driver): given up
V4L2 = Path("/sys/class/video4linux")  # where Linux lists its cameras (and other video devices)


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
    and turns its light on). On Linux a camera is a /dev/video* node. A path must be a video file
    (a regular file) or a device the system lists as a camera: anything else (a pipe, /dev/zero)
    could block the open forever."""
    if isinstance(device, str) and not device.isdigit():
        return device_problem(device)
    if os.name == "posix" and Path("/dev").is_dir() and not camera_nodes():
        return "No camera found"
    return None


def camera_nodes() -> list[str]:
    """The camera devices Linux shows (/dev/video*, those the system lists as cameras where it
    has /sys/class/video4linux), in order; [] elsewhere."""
    dev = Path("/dev")
    nodes = sorted(dev.glob("video*"), key=lambda p: (len(p.name), p.name)) if dev.is_dir() else []
    return [str(p) for p in nodes if device_problem(str(p)) is None]


def device_problem(path: str) -> str | None:
    """None for a video file or a device listed as a camera, else why it cannot be one (by its
    kind alone: nothing is opened)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"Camera {path!r} was not found"
    except OSError as exc:
        return f"Camera {path!r} cannot be used: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISCHR(mode) and (not V4L2.is_dir() or (V4L2 / Path(os.path.realpath(path)).name).exists()):
        return None
    return f"{path!r} is not a camera or a video file"


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
        self.open_timeout_s = OPEN_TIMEOUT_S
        self._opening: _Opening | None = None

    def start(self) -> None:
        """Open the device and start reading. The open runs on a thread of its own: a device that
        does not answer within `open_timeout_s`, or a close() meanwhile, ends the wait with
        CameraUnavailable (the stuck thread is left behind and releases the device if it ever opens)."""
        if isinstance(self.device, str) and not self.device.isdigit():
            problem = device_problem(self.device)
            if problem is not None:
                raise CameraUnavailable(problem)
        device = int(self.device) if isinstance(self.device, str) and self.device.isdigit() else self.device
        opening = self._opening = _Opening()  # before the thread: a close() from now on wakes this wait
        threading.Thread(target=self._open, args=(device, opening), name="camera-open", daemon=True).start()
        if self._stop.is_set() or not opening.wake.wait(self.open_timeout_s) or self._stop.is_set():
            opening.give_up()
            raise CameraUnavailable("The camera was closed while it opened" if self._stop.is_set() else
                                    f"The camera did not answer within {self.open_timeout_s:.0f} s; it may be stuck "
                                    "(unplug it and plug it in again, or close the app using it)")  # fmt: skip
        if opening.error is not None:
            raise opening.error
        self._cap, self._t0 = opening.cap, self.clock.now()
        self._thread = threading.Thread(target=self._run, name="camera", daemon=True)
        self._thread.start()

    def _open(self, device: int | str, opening: "_Opening") -> None:
        """On the opening thread: the capture, opened and set up, handed to `opening`."""
        import cv2

        factory = self._capture_factory or cv2.VideoCapture
        try:
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
        except CameraUnavailable as exc:
            opening.fail(exc)
        except Exception as exc:  # a driver's error: said as the camera's
            opening.fail(CameraUnavailable(f"The camera {self.device!r} could not be opened ({exc})"))
        else:
            opening.done(cap)

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
        if self._opening is not None:
            self._opening.wake.set()  # a start() waiting on a stuck open returns now
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)


class _Opening:
    """One open of a camera, shared by the thread that opens it and the start() that waits: the
    capture or the error, and `wake` when either is there. A capture that opens after start()
    gave up is released at once."""

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.cap: Any = None
        self.error: CameraUnavailable | None = None
        self._lock = threading.Lock()
        self._abandoned = False

    def done(self, cap: Any) -> None:
        with self._lock:
            late = self._abandoned
            if not late:
                self.cap = cap
        if late:
            cap.release()
        self.wake.set()

    def fail(self, error: CameraUnavailable) -> None:
        self.error = error
        self.wake.set()

    def give_up(self) -> None:
        with self._lock:
            self._abandoned, cap, self.cap = True, self.cap, None
        if cap is not None:  # it opened just as the wait ended
            cap.release()
