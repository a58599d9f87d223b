"""The processing shared by the real and the fake microphone: device-rate blocks → mono → 16 kHz
(soxr stream, state kept across blocks) → 20 ms frames with clock timestamps and levels."""

from __future__ import annotations

from typing import Any

import numpy as np

from desktop.media.frames import FRAME_SAMPLES, FRAME_S, SAMPLE_RATE, SILENCE_DB, FrameRing, Frames

# soxr quality of the 16 kHz stream. Its output comes in bursts, so it adds latency: measured at
# 48 kHz in 20 ms blocks, LQ lags 11 ms on average (20 ms at most), HQ 21 ms (37 ms); VHQ twice
# that. LQ keeps 16-bit precision with the band edge at 80 % of 8 kHz: plenty for VAD and ASR,
# and on a barge-in every millisecond before the VAD sees speech counts.
QUALITY = "LQ"


class Capture:
    """Reader side of every microphone. `_capture(block, t)` takes one device block (frames ×
    channels, or 1-D mono) whose first sample was captured at clock time `t`; `read()` hands
    out whole frames. The writer (`_capture`) and the reader may be different threads."""

    sample_rate = SAMPLE_RATE
    frame_samples = FRAME_SAMPLES

    def __init__(self, device_rate: int, *, capacity_s: float = 10.0,
                 quality: str = QUALITY) -> None:  # fmt: skip
        self.device_rate = int(device_rate)
        self._ring = FrameRing(max(2, int(round(capacity_s / FRAME_S))))
        self.quality = quality
        self._rs: Any = None  # the soxr stream, made on the first block, released by `release()`
        self._in_n = 0  # device-rate samples taken in
        self._out_n = 0  # 16 kHz samples given out by the resampler
        self.lost_blocks = 0  # device blocks lost before they reached _capture (see subclasses)

    # ---- reader ------------------------------------------------------------------------------
    def read(self, max_frames: int | None = None, timeout: float = 0.0) -> Frames:
        """Whole frames not read yet, oldest first; waits up to `timeout` real seconds for one."""
        return self._ring.read(max_frames, timeout)

    @property
    def overflows(self) -> int:
        """Frames skipped because the reader fell behind, plus device blocks lost upstream."""
        return self._ring.overflows + self.lost_blocks

    @property
    def level_db(self) -> float:
        """Level of the newest frame (dBFS), for a meter that does not read the frames itself."""
        return self._ring.last_level() if self._ring.written else SILENCE_DB

    def stats(self) -> dict[str, Any]:
        return {
            "frames": self._ring.written,
            "pending": self._ring.pending,
            "overflows": self._ring.overflows,
            "lost_blocks": self.lost_blocks,
            "device_rate": self.device_rate,
            "level_db": self.level_db,
        }

    def release(self) -> None:
        """Drop the resampler (the device is closed): a native soxr object still alive when the
        interpreter exits makes nanobind print "leaked" lines. A later block makes a new one."""
        self._rs = None

    # ---- writer ------------------------------------------------------------------------------
    def _capture(self, block: np.ndarray, t: float) -> int:
        """Mix down, resample and frame one block; returns the frames completed."""
        block = np.asarray(block, np.float32)
        if block.ndim == 1:
            mono = block
        elif block.shape[1] == 1:
            mono = block[:, 0]
        else:
            mono = block.mean(axis=1, dtype=np.float32)
        rs = self._rs  # read once: `release()` may run on another thread
        if rs is None and self.device_rate != SAMPLE_RATE:
            import soxr

            rs = self._rs = soxr.ResampleStream(self.device_rate, SAMPLE_RATE, 1, dtype="float32",
                                                quality=self.quality)  # fmt: skip
            self._in_n = self._out_n = 0  # a new stream: its output starts again at this block
        out = rs.resample_chunk(mono) if rs is not None else mono
        # soxr compensates its filter delay, so output sample k is input position
        # k·device_rate/16000; this block's first sample is input position _in_n at time t.
        t_out = t + (self._out_n * self.device_rate / SAMPLE_RATE - self._in_n) / self.device_rate
        self._in_n += mono.shape[0]
        self._out_n += out.shape[0]
        return self._ring.write(out, t_out)
