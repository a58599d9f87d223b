"""The real microphone: a sounddevice input stream whose callback only copies blocks into a
preallocated ring; a reader thread mixes them to mono, resamples to 16 kHz and cuts 20 ms frames.

Why resampling is not in the callback: soxr's `resample_chunk` is cheap (≈20 µs per 20 ms block)
but allocates its output and holds the GIL; the callback must never wait, so it does one slice
copy and a counter store, and everything else runs on the `mic-reader` thread (≤ one block of
added latency, plus the resampler's own, see capture.QUALITY)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from desktop.media.capture import QUALITY, Capture
from desktop.media.clock import Clock, RealClock
from desktop.media.devices import (NO_INPUT, AudioDevice, AudioUnavailable, import_sounddevice,
                                   input_devices, pick, reindex, rescan, stream_closed, stream_opened)
from desktop.media.pulse import pulse_target

__all__ = ["MicUnavailable", "Microphone", "find_input", "input_available", "input_problem"]
log = logging.getLogger(__name__)


class MicUnavailable(AudioUnavailable):
    """No usable microphone (none found, PortAudio missing, or the stream would not open)."""

    code = "mic_unavailable"


def _sounddevice() -> Any:
    try:
        return import_sounddevice()
    except AudioUnavailable as exc:
        raise MicUnavailable(f"{NO_INPUT} (the PortAudio library is missing)") from exc


def input_problem() -> str | None:
    """Why voice input cannot work here, in plain words; None when a microphone is there. Looks
    afresh each time (PortAudio re-scanned while no stream is open): one may have been plugged in."""
    try:
        _sounddevice()
    except MicUnavailable as exc:
        return exc.message
    rescan()
    found, reason = input_devices()
    return None if found else (reason or NO_INPUT)


def input_available() -> bool:
    """True when at least one input device is listed (the Call page offers calls only then)."""
    return input_problem() is None


def find_input(device: int | str | None = None) -> AudioDevice:
    """The input device to open: the system default for None, else by index or by a part of its
    name (Settings.audio_input_device). Raises MicUnavailable with a plain message."""
    problem = input_problem()
    if problem is not None:
        raise MicUnavailable(problem)
    found, _ = input_devices()
    chosen = pick(found, device)
    if chosen is None:
        raise MicUnavailable(f"Microphone {device!r} not found — voice input is off")
    return chosen


class Microphone(Capture):
    """A microphone at the device's own rate, read as 16 kHz mono 20 ms frames (see Capture).

    Timestamps are `clock` times: the callback stamps each block with clock.now() minus the
    block's age (PortAudio's ADC time when the host API gives it, else the block length)."""

    def __init__(self, device: int | str | None = None, *, clock: Clock | None = None,
                 block_ms: float = 20, raw_blocks: int = 50, capacity_s: float = 10.0,
                 latency: str | float = "low", quality: str = QUALITY) -> None:  # fmt: skip
        self._sd = _sounddevice()
        self.device = find_input(device)
        rate = int(self.device.default_samplerate)
        super().__init__(rate, capacity_s=capacity_s, quality=quality)
        self.clock: Clock = clock or RealClock()
        self.latency = latency
        self.channels = max(1, min(2, self.device.channels))
        self.block_frames = max(1, int(round(block_ms * self.device_rate / 1000)))
        # The callback's ring: whole device blocks, written by the callback only.
        self._raw = np.zeros((raw_blocks, self.block_frames, self.channels), np.float32)
        self._raw_len = np.zeros(raw_blocks, np.int64)
        self._raw_t = np.zeros(raw_blocks, np.float64)
        self._raw_w = 0  # blocks published by the callback
        self._raw_r = 0  # blocks taken by the reader thread
        self.device_overflows = 0  # PortAudio said input overflow (the callback came too late)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._stream: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Open the stream and the reader thread; MicUnavailable when the device will not open."""
        if self._stream is not None:
            return
        stream_opened()  # from the lookup on: no re-scan may stop PortAudio under a half-done open
        try:
            self.device = reindex(self.device, "input")
            with pulse_target("PULSE_SOURCE", self.device.pulse_name):  # a Pulse source: through "pulse"
                self._stream = self._sd.InputStream(
                    device=self.device.index, samplerate=self.device_rate, channels=self.channels,
                    dtype="float32", blocksize=self.block_frames, latency=self.latency,
                    callback=self._callback,
                )  # fmt: skip
            self._stream.start()
        except Exception as exc:  # sounddevice.PortAudioError, ValueError for bad settings
            if self._stream is not None:
                self._stream.close()
            stream_closed()
            self._stream = None
            raise MicUnavailable(f"The microphone {self.device.name!r} could not be opened — "
                                 f"voice input is off ({exc})") from exc  # fmt: skip
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="mic-reader", daemon=True)
        self._thread.start()

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.abort()
            stream.close()
            stream_closed()
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        self._thread = None
        self.release()

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "device_overflows": self.device_overflows}

    # ---- PortAudio callback: copy only --------------------------------------------------------
    def _callback(self, indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        now = self.clock.now()
        if status.input_overflow:
            self.device_overflows += 1
        if self._raw_w - self._raw_r >= len(self._raw):
            self.lost_blocks += 1  # the reader thread stalled for a whole ring
            return
        n = min(frames, self.block_frames)
        if n < frames:  # never with a fixed blocksize; keep the head, count the loss
            self.lost_blocks += 1
        age = frames / self.device_rate
        adc = getattr(time_info, "inputBufferAdcTime", 0.0)
        cur = getattr(time_info, "currentTime", 0.0)
        if adc > 0 and 0 < cur - adc < 1.0:
            age = cur - adc
        i = self._raw_w % len(self._raw)
        self._raw[i, :n] = indata[:n]
        self._raw_len[i] = n
        self._raw_t[i] = now - age
        self._raw_w += 1  # publish last: the reader never sees a half-copied block
        self._wake.set()

    # ---- reader thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.1)
            self._wake.clear()
            try:
                self.process()
            except Exception:  # keep reading: a lost block is better than a dead microphone
                log.exception("microphone reader failed on a block")

    def process(self) -> int:
        """Turn every block the callback has copied into frames (the reader thread's body; tests
        call it directly). Returns the frames completed."""
        done = 0
        while self._raw_r < self._raw_w:
            i = self._raw_r % len(self._raw)
            block = self._raw[i, : self._raw_len[i]].copy()
            t = float(self._raw_t[i])
            self._raw_r += 1  # the slot is free once copied
            done += self._capture(block, t)
        return done
