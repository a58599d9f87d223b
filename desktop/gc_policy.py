"""Garbage collection for the Qt app: automatic collection is off, the start-up heap is frozen, and
younger objects are collected on the Qt thread, one due generation at a time, in short passes."""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, Qt, QTimer

INTERVAL_MS = 100


class QtThreadCollector(QObject):
    """Collects cyclic garbage on the Qt thread only, in passes short enough not to freeze it.

    Only here: Python's automatic collection runs on whichever thread allocates, and on a worker,
    TTS or relay thread it can destroy a QObject with a live timer off its thread; Qt then crashes
    on the next timer event. Short: a pause here is a pause of the window. A full pass over the
    start-up heap (Qt and the app: ~55k objects, 20 ms; with torch and transformers 380k, 210-280
    ms) froze it every 30 s, and a pass over a second's worth of a library's import 60-130 ms. So
    the heap that exists at start-up is frozen (never scanned again: it lives as long as the app);
    each tick collects the oldest generation that Python's own thresholds say is due; and the
    oldest generation waits, as in CPython, until its survivors grew by a quarter since the last
    full pass, so full passes stay rare and cover only what the app built since start-up."""

    def __init__(self, parent: QObject, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        gc.disable()
        gc.collect()  # start-up garbage, before any window exists: nothing to freeze by mistake
        gc.freeze()
        self.thresholds = gc.get_threshold()
        self.long_lived_total = 0  # unfrozen objects in the oldest generation after the last full pass
        self.long_lived_pending = 0  # objects moved there by younger passes since
        self.timer = QTimer(self)
        self.timer.setTimerType(Qt.TimerType.CoarseTimer)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.tick)
        self.timer.start()

    def due(self) -> int | None:
        """The generation to collect now (CPython's rule, minus the automatic trigger), or None."""
        counts, limits = gc.get_count(), self.thresholds
        if not limits[0] or counts[0] <= limits[0]:
            return None
        if counts[2] > limits[2] and self.long_lived_pending > self.long_lived_total // 4:
            return 2
        return 1 if counts[1] > limits[1] else 0

    def tick(self) -> int | None:
        """Collect the due generation, if any; returns it."""
        generation = self.due()
        if generation == 2:
            gc.collect(2)
            self.long_lived_total, self.long_lived_pending = len(gc.get_objects(generation=2)), 0
        elif generation == 1:  # survivors of generations 0 and 1 move to the oldest one
            young = len(gc.get_objects(generation=0)) + len(gc.get_objects(generation=1))
            self.long_lived_pending += max(0, young - gc.collect(1))
        elif generation == 0:
            gc.collect(0)
        return generation


def settle_heap() -> None:
    """The end of start-up, just before the window shows: collect the young garbage and freeze the
    rest (the window, its pages, the modules they imported; 27k objects, a 5-10 ms pass), so that
    no pass on the Qt thread scans it again. A no-op where the collector is not installed."""
    if gc.isenabled():
        return
    gc.collect(1)
    gc.freeze()


def collect_on_qt_thread(app: QObject) -> QtThreadCollector:
    """Install the app's collector once (a second call returns the first); automatic collection is
    back on when the app quits, for whatever runs after Qt."""
    collector = app.findChild(QtThreadCollector)
    if collector is None:
        collector = QtThreadCollector(app)
        if hasattr(app, "aboutToQuit"):
            app.aboutToQuit.connect(gc.enable)
    return collector
