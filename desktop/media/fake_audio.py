"""A fake speaker on a (virtual) clock: the same sink and callback body as the real one, driven
block by block by `pump(until)` or a thread, recording what it played. For tests and benchmarks."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from desktop.media.audio_out import BufferedSink
from desktop.media.clock import Clock
from desktop.media.timeline import DeviceTimeline


class FakeAudioOutput(DeviceTimeline, BufferedSink):
    """Plays `block_ms` of audio per `block_ms` of clock time, from the moment `start()` is
    called. `pump(until)` renders every block due by `until` (default: the clock's now), each
    stamped with its own start time, exactly as a device callback would; underruns, pre-roll,
    flush, backpressure and first_audio_at behave as on the real speaker."""

    thread_name = "fake-speaker"

    def __init__(self, clock: Clock | None = None, *, device_rate: int = 48000,
                 pre_roll_ms: float = 120, volume: float = 1.0, block_ms: float = 20,
                 record: bool = True, **kwargs: Any) -> None:  # fmt: skip
        super().__init__(device_rate, pre_roll_ms=pre_roll_ms, volume=volume,
                         block_ms=block_ms, clock=clock, **kwargs)  # fmt: skip
        self.record = record
        self._blocks: list[np.ndarray] = []
        self._block = np.zeros(self.block_frames, dtype=np.float32)
        self._pump_lock = threading.Lock()
        self._init_timeline()

    def pump(self, until: float | None = None) -> int:
        """Render every block whose start time is <= until; returns how many were rendered."""
        until = self.clock.now() if until is None else until
        done = 0
        with self._pump_lock:
            while not self._closed and (t := self.next_block_at()) <= until + 1e-9:
                self._render(self._block, t)
                if self.record:
                    self._blocks.append(self._block.copy())
                self._n_blocks += 1
                done += 1
        return done

    def pump_blocks(self, n: int) -> None:
        """Render exactly n blocks, whatever the clock says (the device timeline moves on)."""
        self.pump(self.next_block_at() + (n - 1) * self.block_s)

    def played(self) -> np.ndarray:
        """Everything rendered so far, silence included, at `device_rate` (needs `record`)."""
        return np.concatenate(self._blocks) if self._blocks else np.zeros(0, dtype=np.float32)

    def blocks(self) -> list[np.ndarray]:
        return list(self._blocks)

    def close(self) -> None:
        super().close()
        self._stop_thread()
