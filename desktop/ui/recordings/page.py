"""The Recordings page: the list, and the viewer in its place once a recording is opened (read in
the background, with its waveforms); Esc or the back button returns to the list."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QApplication, QStackedWidget, QWidget

from desktop.media.audio_out import AudioSink
from desktop.media.clock import Clock
from desktop.recording.reader import Recording, open_recording
from desktop.ui.recordings.list_panel import ListPanel
from desktop.ui.recordings.viewer import PEAKS_PER_S, Viewer

SETTINGS_PAGE = "Recording"  # the settings dialog's page for where and how long recordings are kept


def load(folder: Path) -> Recording:
    """Read a recording and its waveforms' peaks (the slow part, on the loader's thread)."""
    rec = open_recording(folder)
    rec.user.peaks(PEAKS_PER_S)
    rec.ai.peaks(PEAKS_PER_S)
    return rec


class RecordingsPage(QStackedWidget):
    """`root()`: the recordings folder; `speaker()`: the app's speaker (None: play silently);
    `live()`: the folders being recorded now (the recorder's; an unfinished folder not among them
    was cut short). Emits `status(text)` for the status bar and `settings_page_requested(name)`
    (the empty state's button: the settings dialog's Recording page)."""

    status = Signal(str)
    settings_page_requested = Signal(str)

    def __init__(self, root: Callable[[], Path], speaker: Callable[[], AudioSink | None] = lambda: None, *,
                 live: Callable[[], Iterable[Path]] = lambda: (), clock: Clock | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list = ListPanel(root, live)
        self.viewer = Viewer(speaker, clock, live)
        self.addWidget(self.list)
        self.addWidget(self.viewer)
        self.list.open_requested.connect(self.open)
        self.list.status.connect(self.status)
        self.list.settings_requested.connect(self._ask_settings)
        self.viewer.back.connect(self.show_list)
        self.viewer.status.connect(self.status)
        self.opening: Path | None = None

    def open(self, folder: Path) -> None:
        """Open a recording in the viewer (read in the background)."""
        if self.opening is not None:
            return
        self.opening = folder
        self.status.emit("Opening the recording…")
        QApplication.setOverrideCursor(Qt.CursorShape.BusyCursor)
        self.list.background.run(load, self._loaded, folder)

    def _loaded(self, rec: Recording | None, error: BaseException | None) -> None:
        QApplication.restoreOverrideCursor()
        self.opening = None
        if error is not None or rec is None:
            self.status.emit(getattr(error, "message", None) or f"Could not open the recording: {error}")
            return
        self.viewer.show_recording(rec)
        self.setCurrentWidget(self.viewer)
        self.viewer.setFocus()
        self.status.emit("")

    def show_list(self) -> None:
        self.setCurrentWidget(self.list)
        self.list.table.setFocus()

    def _ask_settings(self) -> None:
        self.settings_page_requested.emit(SETTINGS_PAGE)
