"""The fake camera: an MJPG .avi written with OpenCV's VideoWriter (moving shapes and the frame
number, so each frame differs) and played by `Camera` at the file's own rate on a Clock."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from desktop.media.camera import Camera
from desktop.media.clock import Clock


def write_test_video(path: str | Path, seconds: float = 2.0, fps: float = 15.0, size: tuple[int, int] = (320, 240)) -> Path:
    """Write a short MJPG .avi of a ball crossing the picture with the frame number on it."""
    import cv2

    path = Path(path)
    w, h = size
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (w, h))
    if not writer.isOpened():
        raise OSError(f"OpenCV cannot write {path}")
    n = max(1, round(seconds * fps))
    for i in range(n):
        image = np.full((h, w, 3), (40, 30, 20), np.uint8)
        x = int((i / n) * (w - 40)) + 20
        cv2.circle(image, (x, h // 2), min(w, h) // 8, (0, 180, 255), -1)
        cv2.putText(image, str(i), (8, 30), cv2.FONT_HERSHEY_SIMPLEX, 0.9, (255, 255, 255), 2)
        writer.write(image)
    writer.release()
    return path


class FakeCamera(Camera):
    """A camera that plays `path` (looping) at its frame rate on `clock`."""

    def __init__(self, path: str | Path, clock: Clock | None = None) -> None:
        super().__init__(str(path), clock=clock, paced=True)
