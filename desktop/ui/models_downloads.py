"""The Models page's download box: the switch that allows network for downloads, a repo id or URL
with its files to choose from, and one row per download with its progress, speed and time left,
Resume and Cancel. It only shows and asks; the model control does the work."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QGroupBox, QHBoxLayout, QLabel, QLineEdit, QProgressBar, QPushButton, QVBoxLayout, QWidget,
)

from desktop.models.download import Job, State
from desktop.models.facts import human_bytes
from desktop.models.hub import Choice
from desktop.models.rate import human_eta

ALLOW = "Allow downloads from the Hugging Face Hub (uses the network; off: Omnidesk stays offline)"


def job_detail(job: Job) -> str:
    """What a download row says under its bar."""
    amount = f"{human_bytes(job.done)} of {human_bytes(job.total)}"
    if job.state == State.RUNNING:
        if job.message:
            return f"{amount} · {job.message}"
        return f"{amount} · {human_bytes(job.speed)}/s · {human_eta(job.eta_s)} left"
    return f"{amount} · {job.message}" if job.message else amount


class JobRow(QWidget):
    resume = Signal(str)
    cancel = Signal(str)

    def __init__(self, job: Job, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.job_id = job.id
        self.title = QLabel()
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.detail = QLabel()
        self.detail.setWordWrap(True)
        self.resume_button = QPushButton("Resume")
        self.cancel_button = QPushButton("Cancel")
        self.resume_button.clicked.connect(lambda: self.resume.emit(self.job_id))
        self.cancel_button.clicked.connect(lambda: self.cancel.emit(self.job_id))
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.resume_button)
        top.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 4)
        layout.addLayout(top)
        layout.addWidget(self.bar)
        layout.addWidget(self.detail)
        self.show_job(job)

    def show_job(self, job: Job) -> None:
        self.title.setText(f"<b>{job.title}</b>")
        self.bar.setValue(int(1000 * job.done / job.total) if job.total else 0)
        self.bar.setAccessibleName(f"Download of {job.title}")
        self.detail.setText(job_detail(job))
        self.resume_button.setVisible(job.state == State.PAUSED)
        self.cancel_button.setVisible(job.state in (State.RUNNING, State.PAUSED))
        self.cancel_button.setText("Cancel")


class DownloadsBox(QGroupBox):
    allow_changed = Signal(bool)
    find_requested = Signal(str)  # a repo id or URL
    download_requested = Signal(int)  # the index of the chosen files among the choices shown
    resume_requested = Signal(str)
    cancel_requested = Signal(str)

    def __init__(self, allowed: bool, parent: QWidget | None = None) -> None:
        super().__init__("Download from the Hugging Face Hub", parent)
        self.allow = QCheckBox(ALLOW)
        self.allow.setChecked(allowed)
        self.allow.toggled.connect(self._allowed)
        self.repo = QLineEdit()
        self.repo.setPlaceholderText("A repo id or address, e.g. Qwen/Qwen2.5-1.5B-Instruct-GGUF")
        self.repo.setAccessibleName("Hub repo id or address")
        self.repo.returnPressed.connect(self._find)
        self.find_button = QPushButton("Find files")
        self.find_button.clicked.connect(self._find)
        self.files = QComboBox()
        self.files.setAccessibleName("Files to download")
        self.download_button = QPushButton("Download")
        self.download_button.clicked.connect(lambda: self.download_requested.emit(self.files.currentIndex()))
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.rows: dict[str, JobRow] = {}
        self._jobs = QVBoxLayout()
        ask = QHBoxLayout()
        ask.addWidget(self.repo, 1)
        ask.addWidget(self.find_button)
        pick = QHBoxLayout()
        pick.addWidget(self.files, 1)
        pick.addWidget(self.download_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.allow)
        layout.addLayout(ask)
        layout.addLayout(pick)
        layout.addWidget(self.note)
        layout.addLayout(self._jobs)
        self.show_choices([])
        self._allowed(allowed)

    def _allowed(self, on: bool) -> None:
        for w in (self.repo, self.find_button):
            w.setEnabled(on)
        self.download_button.setEnabled(on and self.files.count() > 0)
        self.allow_changed.emit(on)

    def _find(self) -> None:
        text = self.repo.text().strip()
        if text and self.allow.isChecked():
            self.say("Asking the Hub for the files…")
            self.find_requested.emit(text)

    def say(self, text: str) -> None:
        self.note.setText(text)

    def show_choices(self, choices: list[Choice]) -> None:
        self.files.clear()
        for choice in choices:
            self.files.addItem(choice.label)
        self.files.setCurrentIndex(0 if choices else -1)  # with a placeholder text Qt selects nothing by itself
        self.files.setEnabled(bool(choices))
        self.download_button.setEnabled(bool(choices) and self.allow.isChecked())
        if not choices:
            self.files.setPlaceholderText("Find a repo's files first")

    def show_job(self, job: Job) -> None:
        row = self.rows.get(job.id)
        if job.state == State.CANCELLED:
            if row is not None:
                self.rows.pop(job.id)
                row.setParent(None)
                row.deleteLater()
            return
        if row is None:
            row = self.rows[job.id] = JobRow(job, self)
            row.resume.connect(self.resume_requested)
            row.cancel.connect(self.cancel_requested)
            self._jobs.addWidget(row)
        row.show_job(job)
