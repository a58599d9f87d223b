"""A row of image thumbnails: the images attached in the composer (each with a remove button) and
the images of a sent message (a click opens the image full size in the system viewer)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

SIZE = 72  # px: the longer side of a thumbnail


def thumbnail(data: bytes | None = None, path: str | None = None, size: int = SIZE) -> QPixmap:
    """The image scaled to fit `size` (an empty pixmap where it cannot be read)."""
    pixmap = QPixmap()
    if data is not None:
        pixmap.loadFromData(data)
    elif path is not None and Path(path).is_file():  # a regular file only: a pipe would block the Qt thread
        pixmap.load(path)
    if pixmap.isNull():
        return pixmap
    return pixmap.scaled(QSize(size, size), Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)


class ThumbnailStrip(QWidget):
    """Thumbnails left to right. `removable`: each has a × that emits `removed(index)`."""

    removed = Signal(int)

    def __init__(self, removable: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.removable = removable
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.setSpacing(6)
        self._row.addStretch(1)
        self.labels: list[QLabel] = []
        self.hide()

    def set_images(self, items: list[tuple[str, bytes | None, str | None]]) -> None:
        """items: (name for the tooltip, bytes or None, stored path or None), in order."""
        while self._row.count() > 1:
            item = self._row.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        self.labels = []
        for i, (name, data, path) in enumerate(items):
            self._row.insertWidget(i, self._cell(i, name, data, path))
        self.setVisible(bool(items))

    def _cell(self, index: int, name: str, data: bytes | None, path: str | None) -> QWidget:
        cell = QWidget()
        box = QVBoxLayout(cell)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        label = QLabel()
        pixmap = thumbnail(data, path)
        if pixmap.isNull():
            label.setText("(image missing)" if path else "(unreadable)")
            label.setWordWrap(True)  # two short lines: one would be cut at the thumbnail's width
            label.setAlignment(Qt.AlignmentFlag.AlignCenter)
            label.setStyleSheet("color: palette(placeholder-text); border: 1px dashed palette(mid); border-radius: 4px;")
            label.setFixedSize(SIZE, SIZE // 2 + 8)
        else:
            label.setPixmap(pixmap)
        label.setToolTip(name)
        label.setAccessibleName(f"Image {name}")
        if path and not self.removable and not pixmap.isNull():
            label.setCursor(Qt.CursorShape.PointingHandCursor)
            label.mousePressEvent = lambda _e, p=path: QDesktopServices.openUrl(QUrl.fromLocalFile(p))
        self.labels.append(label)
        if self.removable:
            remove = QToolButton()
            remove.setText("×")
            remove.setToolTip(f"Remove {name}")
            remove.setAutoRaise(True)
            remove.clicked.connect(lambda _=False, i=index: self.removed.emit(i))
            top = QHBoxLayout()
            top.setContentsMargins(0, 0, 0, 0)
            top.addStretch(1)
            top.addWidget(remove)
            box.addLayout(top)
        box.addWidget(label)
        return cell


def names_of(paths: list[str]) -> list[tuple[str, None, str]]:
    return [(Path(p).name, None, p) for p in paths]
