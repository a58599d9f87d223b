"""The time line of a fake audio device on a Clock (the fake speaker and the fake microphone):
block k starts at t0 + k·block_s from `start()` on; `pump()` (the device's own) handles every
block that is due, by hand or from a background thread that sleeps one block of clock time."""

from __future__ import annotations

import threading

from desktop.media.clock import Clock


class DeviceTimeline:
    """Mixed into a device that has `clock`, `block_frames`, `device_rate` and `pump()`."""

    clock: Clock
    block_frames: int
    device_rate: int
    thread_name = "fake-device"

    def _init_timeline(self) -> None:
        self._t0: float | None = None
        self._n_blocks = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def block_s(self) -> float:
        return self.block_frames / self.device_rate

    def start(self, *, thread: bool = False) -> None:
        """Start the time line at the clock's now; with `thread`, a background thread pumps,
        sleeping one block of clock time between pumps (on a manual VirtualClock it runs
        whenever the test advances the clock)."""
        if self._t0 is None:
            self._t0 = self.clock.now()
        if thread and self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.pump()  # type: ignore[attr-defined]
            self.clock.sleep(self.block_s)

    def next_block_at(self) -> float:
        """Clock time of the first sample of the next block."""
        if self._t0 is None:
            raise RuntimeError(f"{type(self).__name__}.start() was not called")
        return self._t0 + self._n_blocks * self.block_s

    def _stop_thread(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            # A thread asleep on a manual VirtualClock wakes only when the clock moves; it is a
            # daemon and exits at its next wake-up, so do not wait long for it.
            self._thread.join(timeout=0.1)
        self._thread = None
