"""The strip above the chat page while the model loads or reloads: what is happening and how
far it got; on failure the error and a button to open the settings. Never blocks the page."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget


class LoadingBanner(QFrame):
    settings_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("loadingBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 8, 14, 8)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setFixedWidth(180)
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(10)
        self.button = QPushButton("Open settings…")
        self.button.clicked.connect(self.settings_requested)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.bar)
        layout.addWidget(self.button)
        self.error = False
        self.hide()

    def show_progress(self, text: str, fraction: float | None) -> None:
        """`fraction` None: a busy indicator (the stage has no percentage)."""
        self._mode(False)
        self.label.setText(text)
        if fraction is None:
            self.bar.setRange(0, 0)
        else:
            self.bar.setRange(0, 100)
            self.bar.setValue(round(fraction * 100))
        self.show()

    def show_error(self, text: str) -> None:
        self._mode(True)
        self.label.setText(text)
        self.show()

    def _mode(self, error: bool) -> None:
        if error != self.error or not self.isVisible():
            self.error = error
            self.setProperty("error", error)
            self.style().unpolish(self)
            self.style().polish(self)
        self.bar.setVisible(not error)
        self.button.setVisible(error)
