"""The Call page's camera: the Camera button (off unless the user turns it on), the live preview
at the camera's rate, and a caption that always says whether the camera is on and whether the
assistant sees it (a model that cannot take images gets nothing: the preview is only for you)."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from desktop.ui import shortcuts
from desktop.ui.style import muted

PREVIEW_W, PREVIEW_H = 256, 192
ON_CSS = "QPushButton:checked { background: #d64541; color: white; border: none; border-radius: 4px; padding: 4px 10px; }"


def to_pixmap(image: np.ndarray, width: int, height: int) -> QPixmap:
    """An OpenCV BGR frame as a pixmap scaled to fit width × height (aspect kept)."""
    rgb = np.ascontiguousarray(image[:, :, ::-1])
    h, w = rgb.shape[:2]
    qimage = QImage(rgb.data, w, h, 3 * w, QImage.Format.Format_RGB888)
    return QPixmap.fromImage(qimage.copy()).scaled(width, height, Qt.AspectRatioMode.KeepAspectRatio,
                                                   Qt.TransformationMode.SmoothTransformation)  # fmt: skip


class CameraPanel(QWidget):
    """`button` goes in the page's controls; the panel (preview + caption) beside the transcript.
    `show_camera(camera, sees)` while it is on (`camera.latest()` polled at `fps`), `show_off()`
    when not; `show_state(usable, problem)`: the button works only in a call with a camera."""

    def __init__(self, fps: int = 15, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.camera: Any = None
        self._shown_index = -1
        self.button = QPushButton("Camera")
        self.button.setCheckable(True)
        self.button.setStyleSheet(ON_CSS)
        self.button.setAccessibleName("Camera on or off")
        self._keys = shortcuts.native("camera")
        self.preview = QLabel()
        self.preview.setFixedSize(PREVIEW_W, PREVIEW_H)
        self.preview.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.preview.setStyleSheet("background: #202124; color: #c8c8c8; border-radius: 6px;")
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.caption.setFixedWidth(PREVIEW_W)
        self.caption.setTextFormat(Qt.TextFormat.PlainText)
        box = QVBoxLayout(self)
        box.setContentsMargins(8, 0, 0, 0)
        box.setSpacing(6)
        box.addWidget(self.preview)
        box.addWidget(self.caption)
        box.addStretch(1)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)
        self._timer = QTimer(self)
        self._timer.setInterval(max(15, int(1000 / fps)))
        self._timer.timeout.connect(self.refresh)
        self.show_off()

    def show_camera(self, camera: Any, sees: bool, rate_hz: float = 1.0) -> None:
        self.camera, self._shown_index = camera, -1
        self.button.setChecked(True)
        self.button.setText("Camera on")
        every = "a frame a second" if rate_hz == 1.0 else f"{rate_hz:g} frames a second"
        self.caption.setText(f"● Camera on — the assistant sees {every} with what you say" if sees else
                             "● Camera on — preview only: the current model cannot see images")
        self.caption.setStyleSheet("color: #d64541;")
        self.preview.setText("Starting the camera…")
        self.setVisible(True)
        self._timer.start()
        self.refresh()

    def show_off(self) -> None:
        self._timer.stop()
        self.camera = None
        self.button.setChecked(False)
        self.button.setText("Camera")
        self.preview.clear()
        self.caption.setText("Camera off")
        self.caption.setStyleSheet(f"color: {muted(self).name()};")
        self.setVisible(False)

    def show_state(self, usable: bool, problem: str | None) -> None:
        """`usable`: a call runs (and no camera is being opened); `problem`: why there is no camera."""
        self.button.setEnabled(usable and problem is None)
        if self.camera is None:
            self.button.setText("No camera" if problem else "Camera")
        if problem:
            tip = f"{problem}: the call goes on with voice"
        elif self.camera is not None:
            tip = f"Turn the camera off ({self._keys})"
        else:
            tip = f"Show yourself to the assistant (off until you turn it on; during a call) ({self._keys})"
        self.button.setToolTip(tip)

    def refresh(self) -> None:
        camera = self.camera
        if camera is None:
            return
        if getattr(camera, "error", None):
            self.preview.setText(camera.error)
            return
        frame = camera.latest()
        if frame is None or frame.index == self._shown_index:
            return
        self._shown_index = frame.index
        self.preview.setPixmap(to_pixmap(frame.image, PREVIEW_W, PREVIEW_H))
