"""The camera frames of a video call as a film strip on the timeline: one thumbnail per slot of
time (the frame shown at the slot's middle), decoded once and kept; click to seek."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QImage, QPainter, QPalette
from PySide6.QtWidgets import QWidget

from desktop.bounded import BoundedDict
from desktop.recording.reader import Frame
from desktop.ui.recordings.lanes import TimeLane

THUMB_H = 54
_KEEP = 256


def load_image(path: Path) -> QImage:
    """A frame as an image (a null image when it cannot be read)."""
    return QImage(str(path))


class FilmStrip(TimeLane):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Camera", THUMB_H + 8, parent)
        self.frames: list[Frame] = []
        self._times: list[float] = []
        self._thumbs: BoundedDict[Path, QImage] = BoundedDict(_KEEP)

    def set_frames(self, frames: list[Frame]) -> None:
        self.frames = frames
        self._times = [f.t for f in frames]
        self._thumbs.clear()
        self.update()

    def thumb(self, path: Path) -> QImage:
        image = self._thumbs.get(path)
        if image is None:
            image = load_image(path)
            if not image.isNull():
                image = image.scaledToHeight(THUMB_H, Qt.TransformationMode.SmoothTransformation)
            self._thumbs[path] = image
        return image

    def slots(self) -> list[tuple[QRectF, Frame]]:
        """The strip's thumbnails: where each goes and which frame it shows."""
        if not self.frames:
            return []
        import bisect

        first = self.thumb(self.frames[0].path)
        width = first.width() if not first.isNull() and first.width() > 0 else THUMB_H * 4 // 3
        n = max(1, int(self.span() // (width + 2)))
        v0, v1 = self.view
        out = []
        for i in range(n):
            t = v0 + (i + 0.5) * (v1 - v0) / n
            k = max(0, bisect.bisect_right(self._times, t) - 1)
            x = self.x_of(v0 + i * (v1 - v0) / n)
            out.append((QRectF(x + 1, 4, width, THUMB_H), self.frames[k]))
        return out

    def paint_content(self, p: QPainter, rect: QRectF) -> None:
        if not self.frames:
            p.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            p.drawText(rect, Qt.AlignmentFlag.AlignCenter, "no camera frames")
            return
        for box, frame in self.slots():
            image = self.thumb(frame.path)
            if image.isNull():
                p.fillRect(box, self.palette().color(QPalette.ColorRole.Mid))
            else:
                p.drawImage(box.topLeft(), image)
