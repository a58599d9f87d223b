"""The current camera frame of a video call, shown as large as the space allows, aspect kept."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPixmap, QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class FrameView(QLabel):
    """The current camera frame, as large as the space allows, aspect kept."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setMinimumSize(240, 180)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setStyleSheet("background: #111; border-radius: 6px;")
        self._pixmap = QPixmap()
        self.path: object = None

    def reset(self) -> None:
        self.path = None
        self._pixmap = QPixmap()
        self.setPixmap(QPixmap())

    def show_frame(self, path: object) -> None:
        if path == self.path:
            return
        self.path = path
        self._pixmap = QPixmap(str(path)) if path is not None else QPixmap()
        self._fit()

    def _fit(self) -> None:
        if self._pixmap.isNull():
            self.setPixmap(QPixmap())
            return
        self.setPixmap(self._pixmap.scaled(self.size(), Qt.AspectRatioMode.KeepAspectRatio,
                                           Qt.TransformationMode.SmoothTransformation))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()
