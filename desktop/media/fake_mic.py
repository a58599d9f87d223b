"""A fake microphone on a (virtual) clock: plays queued audio, files or TTS speech with silence
between, optionally hears a fake speaker (delay, gain), through the real mic's processing path."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from desktop.media.capture import QUALITY, Capture
from desktop.media.clock import Clock, RealClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.media.timeline import DeviceTimeline


def _resample(audio: np.ndarray, rate: int, to: int) -> np.ndarray:
    audio = np.asarray(audio, np.float32)
    if audio.ndim == 2:  # frames × channels → mono
        audio = audio.mean(axis=1, dtype=np.float32)
    if rate == to:
        return audio.reshape(-1)
    import soxr

    return soxr.resample(audio.reshape(-1), rate, to).astype(np.float32, copy=False)


class SpeakerLoopback:
    """What a microphone hears of a FakeAudioOutput: its recorded output, `delay_s` later,
    times `gain`, at the microphone's device rate (resampled with a soxr stream if needed)."""

    def __init__(self, speaker: FakeAudioOutput, rate: int, delay_s: float, gain: float) -> None:
        if not speaker.record:
            raise ValueError("loopback needs a FakeAudioOutput created with record=True")
        self.speaker, self.rate = speaker, int(rate)
        self.delay_s, self.gain = float(delay_s), float(gain)
        self._rs: Any = None
        if speaker.device_rate != self.rate:
            import soxr

            self._rs = soxr.ResampleStream(speaker.device_rate, self.rate, 1, dtype="float32")
        self._buf = np.zeros(0, np.float32)  # speaker output at `rate` from index _start
        self._start = 0  # speaker timeline index (at `rate`) of _buf[0]
        self._taken = 0  # speaker blocks consumed

    def _pull(self) -> None:
        # FakeAudioOutput keeps its blocks in a private list; reading new ones by position avoids
        # copying the whole history on every microphone block.
        blocks = self.speaker._blocks[self._taken :]
        if not blocks:
            return
        self._taken += len(blocks)
        new = np.concatenate(blocks)
        if self._rs is not None:
            new = self._rs.resample_chunk(new)
        self._buf = np.concatenate([self._buf, new])

    def add_into(self, out: np.ndarray, t: float) -> bool:
        """Add what the microphone hears from clock time `t` on into `out`; False when the
        speaker has not rendered that far yet (the microphone block then waits)."""
        t0 = self.speaker._t0  # private too: the start of its timeline
        if t0 is None:  # speaker not started: silent
            return True
        s = int(round((t - self.delay_s - t0) * self.rate))
        e = s + out.size
        if e <= 0:
            return True
        if self._start + self._buf.size < e:
            self._pull()
        if self._start + self._buf.size < e:
            self.speaker.pump()  # render what is due by now, as the device would have
            self._pull()
        if self._start + self._buf.size < e:
            return False
        lo = max(s, self._start)
        out[lo - s :] += self.gain * self._buf[lo - self._start : e - self._start]
        drop = max(0, s - self._start)  # the microphone never looks back
        self._buf, self._start = self._buf[drop:], self._start + drop
        return True


class FakeMicrophone(DeviceTimeline, Capture):
    """Captures `block_ms` of audio per `block_ms` of clock time from `start()` on, at
    `device_rate`, and hands it through the same mono/resample/frame path as the real
    microphone. A block is captured once the clock has passed its end and is stamped with its
    start. `pump(until)` captures every block complete by `until`; `start(thread=True)` does it
    on a background thread."""

    thread_name = "fake-mic"

    def __init__(self, clock: Clock | None = None, *, device_rate: int = 48000,
                 block_ms: float = 20, capacity_s: float = 10.0,
                 quality: str = QUALITY) -> None:  # fmt: skip
        super().__init__(device_rate, capacity_s=capacity_s, quality=quality)
        self.clock: Clock = clock or RealClock()
        self.block_frames = max(1, int(round(block_ms * self.device_rate / 1000)))
        self._segments: list[tuple[float, np.ndarray, float]] = []  # (start time, audio, gain)
        self._end_t: float | None = None  # when the last queued audio ends
        self._taps: list[SpeakerLoopback] = []
        self._lock = threading.Lock()  # segments and taps: written by callers, read by pump
        self._pump_lock = threading.Lock()
        self._closed = False
        self._init_timeline()

    # ---- what the microphone hears -----------------------------------------------------------
    def play(self, audio: np.ndarray, sample_rate: int = 16000, *, at: float | None = None,
             gain: float = 1.0) -> float:  # fmt: skip
        """Queue audio (mono, or frames × channels) to be heard from clock time `at`, by default
        right after the audio queued before (or now, if that has ended). Overlapping audio is
        mixed. Returns the clock time of its first sample; `end_time()` then says when it ends."""
        data = _resample(audio, int(sample_rate), self.device_rate)
        with self._lock:
            if at is None:
                at = max(self.clock.now(), self._end_t or 0.0, self._t0 or 0.0)
            self._segments.append((float(at), data, float(gain)))
            end = at + data.size / self.device_rate
            self._end_t = end if self._end_t is None else max(self._end_t, end)
        return float(at)

    def play_file(self, path: str | Path, *, at: float | None = None, gain: float = 1.0) -> float:
        """Queue an audio file (any format and rate soundfile reads)."""
        import soundfile

        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
        return self.play(data, rate, at=at, gain=gain)

    def say(self, tts: Any, text: str, *, at: float | None = None, gain: float = 1.0) -> float:
        """Queue `text` spoken by a TTS engine (desktop.model.tts: `synthesize`, `sample_rate`)."""
        chunks = [np.asarray(c, np.float32).reshape(-1) for c in tts.synthesize(text)]
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        return self.play(audio, tts.sample_rate, at=at, gain=gain)

    def end_time(self) -> float | None:
        """Clock time at which the queued audio ends (None if nothing was queued)."""
        with self._lock:
            return self._end_t

    def loopback(self, speaker: FakeAudioOutput, delay_ms: float = 30.0,
                 gain: float = 0.5) -> SpeakerLoopback:  # fmt: skip
        """Also hear `speaker` (record=True) as a room would: its output `delay_ms` later, times
        `gain`. The echo test's far end."""
        tap = SpeakerLoopback(speaker, self.device_rate, delay_ms / 1000, gain)
        with self._lock:
            self._taps.append(tap)
        return tap

    # ---- the device timeline -----------------------------------------------------------------
    def pump(self, until: float | None = None) -> int:
        """Capture every block that is complete by `until` (default: now); returns the frames
        completed. Stops early at a block whose loopback speaker has not rendered yet."""
        until = self.clock.now() if until is None else until
        done = 0
        with self._pump_lock:
            while not self._closed and (t := self.next_block_at()) + self.block_s <= until + 1e-9:
                block = self._render(t)
                if block is None:
                    break
                done += self._capture(block, t)
                self._n_blocks += 1
        return done

    def pump_blocks(self, n: int) -> int:
        """Capture exactly n more blocks, whatever the clock says."""
        return self.pump(self.next_block_at() + n * self.block_s)

    def _render(self, t: float) -> np.ndarray | None:
        out = np.zeros(self.block_frames, np.float32)
        s0 = self._n_blocks * self.block_frames  # timeline index of out[0]
        e0 = s0 + self.block_frames
        with self._lock:
            for tap in self._taps:
                if not tap.add_into(out, t):
                    return None
            keep = []
            for start_t, data, gain in self._segments:
                s = int(round((start_t - self._t0) * self.device_rate))  # type: ignore[operator]
                lo, hi = max(s, s0), min(s + data.size, e0)
                if hi > lo:
                    out[lo - s0 : hi - s0] += gain * data[lo - s : hi - s]
                if s + data.size > e0:
                    keep.append((start_t, data, gain))
            self._segments = keep
        return out

    def close(self) -> None:
        self._closed = True
        self._stop_thread()
        with self._lock:
            self._taps = []  # their soxr streams go with them
        self.release()
