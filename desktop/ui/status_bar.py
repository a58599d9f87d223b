"""The main window's status bar: the model, the workers' states ("1 worker: idle", "loading 40% ·
about 12 s left") and the queue length, kept as permanent fields; transient messages appear on the left."""

from __future__ import annotations

from collections import Counter

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QStatusBar, QWidget

from desktop.ui.admin.format import loading_fraction, loading_left, percent
from desktop.gateway.monitor import Snapshot, WorkerRow
from desktop.ui.plain import plain_tip

ORDER = ("busy", "idle", "loading", "error", "unreachable")
# The workers' states in words a user reads; the others ("idle", "busy", "loading", "error",
# "unreachable") are words already.
PLAIN = {"duplex_active": "in a call", "duplex_paused": "call paused"}


def plain_state(state: str) -> str:
    """A worker state as the status bar says it: "duplex_active" → "in a call"."""
    return PLAIN.get(state, state.replace("_", " "))


def worker_state_text(w: WorkerRow) -> str:
    if w.state == "loading":
        fraction, left = loading_fraction(w.message), loading_left(w.message)
        text = f"loading {percent(fraction)}" if fraction is not None else "loading"
        return f"{text} · {left}" if left else text
    return plain_state(w.state)


def worker_summary(workers: list[WorkerRow]) -> str:
    """'1 worker: idle' · '1 worker: loading 40%' · '2 workers: 1 busy, 1 idle' · 'No workers'."""
    if not workers:
        return "No workers"
    if len(workers) == 1:
        return f"1 worker: {worker_state_text(workers[0])}"
    counts = Counter(w.state for w in workers)
    if len(counts) == 1:
        (state,) = counts
        if state == "loading":
            fractions = [loading_fraction(w.message) for w in workers]
            if all(f is not None for f in fractions):
                return f"{len(workers)} workers: loading {percent(min(fractions))}"  # type: ignore[type-var]
        return f"{len(workers)} workers: {plain_state(state)}"
    parts = [f"{counts[s]} {s}" for s in ORDER if counts[s]]
    parts += [f"{n} {plain_state(s)}" for s, n in counts.items() if s not in ORDER]
    return f"{len(workers)} workers: " + ", ".join(parts)


def queue_summary(length: int) -> str:
    return "Queue: empty" if length == 0 else f"Queue: {length} waiting"


class StatusBar(QStatusBar):
    """`show_snapshot(snapshot or None)` every tick; `set_model(...)` when a model is up."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model_label = QLabel("No model loaded")
        self.workers_label = QLabel("Starting…")
        self.queue_label = QLabel(queue_summary(0))
        self._fields: list[QWidget] = []
        for label in (self.model_label, self.workers_label, self.queue_label):
            label.setContentsMargins(8, 0, 8, 0)
            label.setTextFormat(Qt.TextFormat.PlainText)  # model names and errors are shown as written
            self._fields += [_separator(), label]
            self.addPermanentWidget(self._fields[-2])
            self.addPermanentWidget(label)

    def say(self, text: str, timeout_ms: int = 6000) -> None:
        """A transient message on the left, elided so that it never runs under the fields."""
        room = self.width() - sum(w.sizeHint().width() for w in self._fields) - 48
        self.showMessage(self.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, max(room, 80)), timeout_ms)
        self.setToolTip(plain_tip(text))

    def set_model(self, name: str | None, detail: str = "") -> None:
        self.model_label.setText(f"Model: {name}" if name else "No model loaded")
        self.model_label.setToolTip(plain_tip(detail))

    def show_snapshot(self, snapshot: Snapshot | None, phase: str | None = None) -> None:
        """`phase`: what the app is doing while there is no gateway (e.g. restarting the model)."""
        if snapshot is None:
            self.workers_label.setText(phase or "No workers")
            self.queue_label.setText(queue_summary(0))
            return
        self.workers_label.setText(phase or worker_summary(snapshot.workers))
        tips = [f"{w.id} ({w.device}): {plain_state(w.state)}{' · ' + w.message if w.message else ''}" for w in snapshot.workers]
        self.workers_label.setToolTip(plain_tip("\n".join(tips)))
        self.queue_label.setText(queue_summary(len(snapshot.queue) or snapshot.queue_stats.length))


def _separator() -> QFrame:
    line = QFrame()
    line.setFrameShape(QFrame.Shape.VLine)
    line.setFrameShadow(QFrame.Shadow.Sunken)
    return line
