"""A friendly "coming soon" page for features that are designed but not built yet (calls,
recordings): a title, what it will do, and where to go meanwhile."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from desktop.ui.icons import nav_icon


class ComingSoonPage(QWidget):
    def __init__(self, icon: str, title: str, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(f"comingSoon-{icon}")
        layout = QVBoxLayout(self)
        layout.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.setSpacing(14)
        self._icon = icon
        picture = self.picture = QLabel()
        picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._paint()
        heading = QLabel(title)
        heading.setObjectName("pageTitle")
        heading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        font = heading.font()
        font.setPointSizeF(font.pointSizeF() * 1.6)
        font.setBold(True)
        heading.setFont(font)
        badge = QLabel("Coming soon")
        badge.setObjectName("comingSoonBadge")
        badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        body = QLabel(text)
        body.setWordWrap(True)
        body.setAlignment(Qt.AlignmentFlag.AlignCenter)
        body.setFixedWidth(440)
        body.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        for widget in (picture, heading, badge, body):
            layout.addWidget(widget, 0, Qt.AlignmentFlag.AlignHCenter)
        self.body = body

    def _paint(self) -> None:
        color = self.palette().color(QPalette.ColorRole.PlaceholderText)
        self.picture.setPixmap(nav_icon(self._icon, color).pixmap(72, 72))

    def changeEvent(self, event: QEvent) -> None:  # follow a light/dark switch
        if event.type() == QEvent.Type.PaletteChange:
            self._paint()
        super().changeEvent(event)


def call_page() -> ComingSoonPage:
    return ComingSoonPage(
        "call", "Voice and video calls",
        "Talk with the assistant hands-free: it listens while it speaks, stops the moment you "
        "interrupt, and can look through your camera. Until then, chat is one click away (Ctrl+1).")


def recordings_page() -> ComingSoonPage:
    return ComingSoonPage(
        "recordings", "Recordings",
        "Play back recorded calls with their text, audio and video in sync, and let old "
        "recordings clean themselves up by age or size. Recording stays off unless you turn it on.")


def models_page() -> ComingSoonPage:
    return ComingSoonPage(
        "models", "Models",
        "The models on this computer, to load, unload and download. The list could not be built; "
        "the details are in the log file (Help → Open log folder).")
