"""The echo canceller's far-end reference: what the speaker actually played and when, tapped from
its render callback and kept as a 16 kHz timeline that is read by clock time."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from desktop.media.capture import QUALITY
from desktop.media.frames import SAMPLE_RATE

if TYPE_CHECKING:
    from desktop.media.audio_out import PlayedAudio

# A block stamped further than this from where the previous one ended starts a new segment (the
# stream stopped, or the clock jumped). Smaller differences are callback jitter: the device plays
# its blocks back to back, so they are placed back to back.
RESYNC_S = 0.05


class FarEndReference:
    """Writer: `on_played(block, t)`, registered in a speaker's `on_played` list, copies each
    rendered device block and its clock time into a preallocated ring (the audio thread only
    copies). Reader: `read(t, n)` gives the n 16 kHz samples played from clock time t on,
    silence where nothing was played. Resampling (soxr stream, the microphone's quality, so the
    reference and the echo in the microphone went through the same filter) happens on the
    reader's thread. One writer thread and one reader thread."""

    def __init__(self, device_rate: int, *, block_frames: int = 1024, capacity_s: float = 4.0,
                 rate: int = SAMPLE_RATE, quality: str = QUALITY) -> None:  # fmt: skip
        self.device_rate, self.rate, self.quality = int(device_rate), int(rate), quality
        # Raw blocks (device rate): rows of block_frames; a longer block takes several rows.
        self._rows = max(4, int(capacity_s * self.device_rate / block_frames))
        self._raw = np.zeros((self._rows, block_frames), np.float32)
        self._len = np.zeros(self._rows, np.int64)
        self._t = np.zeros(self._rows, np.float64)
        self._w = 0  # rows published (writer-owned)
        # The 16 kHz timeline: absolute index i is clock time t0 + i / rate.
        self._ring = np.zeros(int(capacity_s * self.rate), np.float32)
        self._hi = 0  # one past the newest sample written
        self._t0: float | None = None
        self._r = 0  # rows consumed (reader-owned)
        self._rs: Any = None  # the segment's soxr stream (None: the speaker plays at 16 kHz)
        self._in_segment = False
        self._seg_i = 0  # timeline index where the current segment's resampled output starts
        self._next_t = 0.0  # clock time at which the current segment's next block should start
        self._out_n = 0  # samples the current segment's resampler has given out
        self.lost_blocks = 0  # rows the reader fell too far behind to read
        self.resyncs = 0
        self._lock = threading.Lock()  # readers only
        self._untap: Callable[[], None] | None = None

    @classmethod
    def tap(cls, speaker: PlayedAudio, **kwargs: Any) -> FarEndReference:
        """A reference fed by `speaker` (the Voice, or a sink: real or fake) from now on."""
        ref = cls(speaker.device_rate, block_frames=speaker.block_frames, **kwargs)
        ref._untap = speaker.tap(ref.on_played)
        return ref

    def release(self) -> None:
        """Untap (if `tap` made it) and drop the segment's resampler (a native soxr object alive
        at exit makes nanobind print "leaked" lines). A later block starts a new segment."""
        untap, self._untap = self._untap, None
        if untap is not None:
            untap()
        with self._lock:
            self._rs, self._in_segment = None, False

    # ---- writer: the speaker's audio thread --------------------------------------------------
    def on_played(self, block: np.ndarray, t: float) -> None:
        """Copy one played block whose first sample left the speaker at clock time t."""
        width = self._raw.shape[1]
        for pos in range(0, block.shape[0], width):
            k = min(width, block.shape[0] - pos)
            i = self._w % self._rows
            self._raw[i, :k] = block[pos : pos + k]
            self._len[i] = k
            self._t[i] = t + pos / self.device_rate
            self._w += 1  # publish last

    # ---- reader ------------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """Whether the reader has seen a played block yet."""
        return self._t0 is not None

    def read_waiting(self, t: float, n: int, wait_s: float) -> tuple[np.ndarray, bool]:
        """`read`, but when the speaker is playing and just a little behind (its newest sample
        within `wait_s` of the end of the span), wait up to `wait_s` of real time for it: the
        microphone's thread can run ahead of the speaker's by a block or two under load, and a
        reference with a hole makes the echo canceller pass echo. A stopped speaker: no wait."""
        samples, complete = self.read(t, n)
        if complete or wait_s <= 0 or self._t0 is None:
            return samples, complete
        behind = t + n / self.rate - (self._t0 + self._hi / self.rate)
        if behind > wait_s:
            return samples, complete
        deadline = time.monotonic() + wait_s
        while not complete and time.monotonic() < deadline:
            time.sleep(0.002)
            samples, complete = self.read(t, n)
        return samples, complete

    def read(self, t: float, n: int) -> tuple[np.ndarray, bool]:
        """The n samples (16 kHz) played from clock time t on, zeros where nothing was, and
        whether the speaker has played past their end (False: the tail is not known yet)."""
        with self._lock:
            self._drain()
            out = np.zeros(n, np.float32)
            if self._t0 is None:
                return out, False
            s = int(round((t - self._t0) * self.rate))
            lo, hi = max(s, self._hi - self._ring.size, 0), min(s + n, self._hi)
            if hi > lo:
                idx = np.arange(lo, hi) % self._ring.size
                out[lo - s : hi - s] = self._ring[idx]
            return out, s + n <= self._hi

    def _drain(self) -> None:
        w, keep = self._w, self._rows - 1  # the row at w % rows may be being written
        if w - self._r > keep:
            self.lost_blocks += w - self._r - keep
            self._r = w - keep
        for j in range(self._r, w):
            i = j % self._rows
            k = int(self._len[i])
            block, t = self._raw[i, :k].copy(), float(self._t[i])
            if self._w - keep > j:  # overwritten while we copied
                self.lost_blocks += 1
                continue
            self._place(block, t)
        self._r = w

    def _place(self, block: np.ndarray, t: float) -> None:
        if self._t0 is None:
            self._t0 = t
        if not self._in_segment or abs(t - self._next_t) > RESYNC_S:
            self.resyncs += self._in_segment
            self._new_segment(t)
        self._next_t += block.size / self.device_rate
        out = self._rs.resample_chunk(block) if self._rs is not None else block
        # soxr compensates its filter delay: output sample k is input position k·ratio, so the
        # segment's output is contiguous from _seg_i (it arrives in bursts, a little late).
        self._write(self._seg_i + self._out_n, out)
        self._out_n += out.size

    def _new_segment(self, t: float) -> None:
        if self._rs is not None:  # the old segment's delayed tail
            tail = self._rs.resample_chunk(np.zeros(0, np.float32), last=True)
            self._write(self._seg_i + self._out_n, tail)
        self._rs, self._in_segment = None, True
        if self.device_rate != self.rate:
            import soxr

            self._rs = soxr.ResampleStream(self.device_rate, self.rate, 1, dtype="float32",
                                           quality=self.quality)  # fmt: skip
        self._seg_i = int(round((t - self._t0) * self.rate))  # type: ignore[operator]
        self._next_t, self._out_n = t, 0

    def _write(self, s: int, data: np.ndarray) -> None:
        size = self._ring.size
        if s > self._hi:  # a gap: silence (only the part still inside the ring matters)
            gap = np.arange(max(self._hi, s - size), s) % size
            self._ring[gap] = 0.0
        if data.size:
            idx = np.arange(s, s + data.size) % size
            self._ring[idx[-size:]] = data[-size:]
        self._hi = max(self._hi, s + data.size)
