"""Speaker output: the `AudioSink` interface the pipeline writes TTS audio to, the buffering core
shared with the fake device (resample, jitter buffer, backpressure, flush), and `SpeakerOutput`."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any, Callable, Protocol

import numpy as np

from desktop.bounded import BoundedDict
from desktop.media.clock import Clock, RealClock
from desktop.media.devices import (NO_OUTPUT, AudioUnavailable, find_output, import_sounddevice, reindex,
                                   stream_closed, stream_opened)
from desktop.media.pulse import pulse_target
from desktop.media.jitter import JitterBuffer
from desktop.media.preroll import AdaptivePreRoll, PreRollConfig

__all__ = ["AudioSink", "AudioUnavailable", "BufferedSink", "PlayedAudio", "SpeakerOutput", "Tap"]
log = logging.getLogger(__name__)
_AUDIBLE = 1e-3  # |sample| above this (-60 dBFS) counts as sound for first_audio_at
_KEEP = 256  # finished or flushed requests remembered (heard_s, first_audio_at)


Tap = Callable[[np.ndarray, float], None]  # (a played block: a view, copy it; clock time of its first sample)


class PlayedAudio(Protocol):
    """What a tap on played audio needs: the device's rate and block size, and the tap itself.
    An AudioSink offers it, and so does the Voice that owns one (outer objects tap the Voice)."""

    @property
    def device_rate(self) -> int: ...

    @property
    def block_frames(self) -> int: ...

    def tap(self, fn: Tap) -> Callable[[], None]:
        """Call fn(block, t) with every block played from now on, on the audio thread (it must
        only copy); returns the untap."""


class AudioOut(Protocol):
    """Playing one's own audio under one's own request ids, and nothing else: what the Voice lends
    the recordings player (`Voice.lend`). Volume, ducking, taps and what was heard stay the Voice's."""

    def start(self) -> None: ...

    def write(self, request_id: str, samples: np.ndarray, sample_rate: int) -> None: ...

    def end(self, request_id: str) -> None: ...

    def flush(self, request_id: str | None = None) -> None: ...


class AudioSink(PlayedAudio, Protocol):
    """Where a request's speech goes: the speaker (`SpeakerOutput`) or the fake one
    (`media/fake_audio.FakeAudioOutput`), both `BufferedSink`s. Requests play in the order they
    are written; one request's writes should not interleave with another's. The output pipeline
    only writes, ends and flushes; the Voice, the sink's only owner, uses the rest."""

    volume: float  # 0..2; 0 silences at once (ducking), the audio still plays on

    def start(self) -> None:
        """Open the device's stream (once; later calls do nothing)."""

    def write(self, request_id: str, samples: np.ndarray, sample_rate: int) -> None:
        """Queue float32 mono samples; blocks (bounded) while the buffer is above high water."""

    def end(self, request_id: str) -> None:
        """No more audio for this request: play its tail without waiting for pre-roll."""

    def pace(self, request_id: str, audio_s: float, synth_s: float, next_s: float | None = None) -> None:
        """The synthesiser's word before it writes a chunk: it made `audio_s` seconds of audio in
        `synth_s` seconds, and the chunk after it should hold `next_s` seconds (None: not known).
        A sink with an adaptive pre-roll waits for enough audio to hide that synthesis."""

    def flush(self, request_id: str | None = None) -> None:
        """Stop playing this request (None: everything) within one device block; later writes
        for it are dropped."""

    def close(self) -> None:
        """Stop accepting audio and release the device."""

    def first_audio_at(self, request_id: str) -> float | None:
        """Clock time the request's first audible sample left the buffer, if it has."""

    def heard_s(self, request_id: str) -> float:
        """Seconds of this request that have been played (frozen at a flush)."""

    def queued_s(self, request_id: str) -> float:
        """Seconds of this request written but not played yet."""

    def stats(self) -> dict[str, Any]:
        """underruns, starved_s, played_s, buffered_ms, first_audio_at, device_rate, dropped_s
        (and device_underflows on the real speaker)."""


class BufferedSink:
    """Writer side of every sink and the body of its device callback (`_render`)."""

    def __init__(self, device_rate: int, *, pre_roll_ms: float = 120, volume: float = 1.0,
                 block_ms: float = 20, capacity_s: float = 30, high_water_ms: float = 3000,
                 max_block_s: float = 5.0, clock: Clock | None = None,
                 adaptive: PreRollConfig | None = None) -> None:  # fmt: skip
        """adaptive: a pre-roll that follows the synthesiser (`pace`) and the underruns
        (`media/preroll.py`), starting at its `start_ms` instead of the fixed `pre_roll_ms`."""
        self.device_rate = int(device_rate)
        self.block_frames = max(1, int(round(block_ms * self.device_rate / 1000)))
        self.max_block_s = max_block_s
        self.clock: Clock = clock or RealClock()
        self.volume = volume
        self._jitter = JitterBuffer(self.device_rate, capacity_s=capacity_s, pre_roll_ms=pre_roll_ms,
                                    high_water_ms=high_water_ms, credit_wait=adaptive is not None)  # fmt: skip
        self._preroll = AdaptivePreRoll(adaptive) if adaptive is not None else None
        if self._preroll is not None:
            self._set_pre_roll(self._preroll.floor_s)
        self._lock = threading.Lock()  # serialises writers only; the callback never takes it
        self._resamplers: dict[str, tuple[int, Any]] = {}
        self._segments: BoundedDict[str, list[int]] = BoundedDict(_KEEP)  # rid -> [start, end] positions
        self._flushed: BoundedDict[str, None] = BoundedDict(_KEEP)
        self._watch: tuple[tuple[str, int], ...] = ()  # writer-owned: (rid, start) awaiting sound
        self._first_audio: dict[str, float] = {}  # written by the callback
        self._last_first_audio: float | None = None
        self._played = 0
        self._dropped = 0
        self._closed = False
        # Called from the device callback with each rendered block (a view: copy it) and the
        # clock time of its first sample, e.g. the echo canceller's far-end reference. They
        # must only copy: they run on the audio thread.
        self.on_played: list[Tap] = []
        self.underrun_times: deque[float] = deque(maxlen=64)  # clock times of the latest underruns

    @property
    def volume(self) -> float:
        return self._volume

    @volume.setter
    def volume(self, value: float) -> None:
        self._volume = float(min(max(value, 0.0), 2.0))

    # ---- AudioSink ---------------------------------------------------------------------------
    def start(self) -> None:
        """A sink without a device stream has nothing to open (the speaker and the fake do)."""

    def tap(self, fn: Tap) -> Callable[[], None]:
        """Call fn(block, t) with every block played from now on (see `on_played`); returns
        the untap."""
        self.on_played.append(fn)

        def untap() -> None:
            if fn in self.on_played:
                self.on_played.remove(fn)

        return untap

    def write(self, request_id: str, samples: np.ndarray, sample_rate: int) -> None:
        data = np.asarray(samples, dtype=np.float32).reshape(-1)
        with self._lock:
            if self._closed or request_id in self._flushed:
                return
            self._follow(request_id, paced=False)
            data = self._resample(request_id, data, int(sample_rate))
        self._append(request_id, data)

    def pace(self, request_id: str, audio_s: float, synth_s: float, next_s: float | None = None) -> None:
        if self._preroll is None:
            return
        with self._lock:
            self._follow(request_id, paced=True)
            self._preroll.measured(audio_s, synth_s)
            self._set_pre_roll(self._preroll.lead_s(next_s))

    def end(self, request_id: str) -> None:
        with self._lock:
            entry = self._resamplers.pop(request_id, None)
        if entry is not None:  # the resampler's delayed tail
            self._append(request_id, entry[1].resample_chunk(np.zeros(0, np.float32), last=True))
        with self._lock:
            if request_id not in self._flushed:
                self._jitter.end()

    def flush(self, request_id: str | None = None) -> None:
        with self._lock:
            r = self._jitter.read_pos
            rids = list(self._segments) if request_id is None else [request_id]
            for rid in rids:
                self._resamplers.pop(rid, None)
                seg = self._segments.get(rid)
                if seg is not None:
                    if request_id is not None:
                        self._jitter.flush(seg[0], seg[1])
                    seg[1] = min(seg[1], max(seg[0], r))  # freezes heard_s
            if request_id is None:
                self._jitter.flush()
            self._flushed.update(dict.fromkeys(rids))
            self._watch = tuple(w for w in self._watch if w[0] not in self._flushed)

    def close(self) -> None:
        """Stop accepting audio; writers blocked on backpressure return at once."""
        with self._lock:
            self._closed = True

    # ---- queries -----------------------------------------------------------------------------
    def first_audio_at(self, request_id: str) -> float | None:
        """Clock time the request's first audible sample left the buffer, if it has."""
        return self._first_audio.get(request_id)

    def heard_s(self, request_id: str) -> float:
        """Seconds of this request that have been played (frozen at a flush)."""
        seg = self._segments.get(request_id)
        if seg is None:
            return 0.0
        return min(max(self._jitter.read_pos - seg[0], 0), seg[1] - seg[0]) / self.device_rate

    def queued_s(self, request_id: str) -> float:
        """Seconds of this request written but not played yet (0 once played out or flushed)."""
        seg = self._segments.get(request_id)
        if seg is None:
            return 0.0
        return max(seg[1] - max(self._jitter.read_pos, seg[0]), 0) / self.device_rate

    def stats(self) -> dict[str, Any]:
        return {
            "underruns": self._jitter.underruns,
            "starved_s": self._jitter.starved / self.device_rate,  # the underruns' silence
            "played_s": self._played / self.device_rate,
            "buffered_ms": self._jitter.buffered_ms,
            "first_audio_at": self._last_first_audio,
            "device_rate": self.device_rate,
            "dropped_s": self._dropped / self.device_rate,
            "pre_roll_ms": 1000 * self._jitter.pre_roll / self.device_rate,
            "tts_rtf": self._preroll.rtf if self._preroll is not None else None,
        }

    # ---- writer internals --------------------------------------------------------------------
    def _follow(self, rid: str, *, paced: bool) -> None:
        """Tell the adaptive pre-roll who writes and how often the speaker ran dry (caller holds
        the lock); it may move the gate."""
        jb = self._jitter
        if self._preroll is not None and (lead := self._preroll.writing(
                rid, paced=paced, underruns=jb.underruns, starved_s=jb.starved / self.device_rate)) is not None:
            self._set_pre_roll(lead)

    def _set_pre_roll(self, seconds: float) -> None:
        """The jitter buffer's gate, read by the callback; below high water so that a writer held
        at high water never waits on a reader that waits for pre-roll."""
        jb = self._jitter
        jb.set_pre_roll(min(int(round(seconds * self.device_rate)), int(0.8 * jb.high_water)))

    def _resample(self, rid: str, data: np.ndarray, rate: int) -> np.ndarray:
        entry = self._resamplers.get(rid)
        if entry is not None and entry[0] != rate:  # rate changed mid-request: new stream
            entry = None
        if rate == self.device_rate:
            return data
        if entry is None:
            import soxr

            entry = (rate, soxr.ResampleStream(rate, self.device_rate, 1, dtype="float32"))
            self._resamplers[rid] = entry
        return entry[1].resample_chunk(data)

    def _append(self, rid: str, data: np.ndarray) -> None:
        """Put data into the ring: wait while above high water (at most max_block_s), and while
        the ring is full; give up (drop, counted) only if the device stopped draining."""
        deadline = time.monotonic() + self.max_block_s
        pos, jb = 0, self._jitter
        while True:
            with self._lock:
                if self._closed or rid in self._flushed:
                    return
                late = time.monotonic() >= deadline
                if not jb.above_high_water or late:
                    seg = self._segments.get(rid)
                    if seg is None:
                        seg = self._segments[rid] = [jb.write_pos, jb.write_pos]
                        self._watch += ((rid, jb.write_pos),)
                        self._prune()
                    pos += jb.write(data[pos:])
                    seg[1] = jb.write_pos
                if pos >= len(data):
                    return
                if late and jb.free == 0:
                    self._dropped += len(data) - pos
                    log.warning("audio device is not draining; dropped %d samples", len(data) - pos)
                    return
            time.sleep(min(0.005, self.block_frames / self.device_rate / 2))

    def _prune(self) -> None:
        self._watch = tuple(w for w in self._watch if w[0] not in self._first_audio)
        for rid in list(self._first_audio)[:-_KEEP]:
            del self._first_audio[rid]

    # ---- reader: the device callback body ----------------------------------------------------
    def _render(self, out: np.ndarray, now: float) -> None:
        """Fill one device block `out` (1-D float32 view) and hand it to `on_played`."""
        self._fill(out, now)
        for tap in self.on_played:
            tap(out, now)

    def _fill(self, out: np.ndarray, now: float) -> None:
        """Copy the next block from the ring into `out` (silence where there is none)."""
        jb = self._jitter
        dry = jb.underruns
        filled = jb.read_into(out)
        if jb.underruns != dry:
            self.underrun_times.append(now)  # when the speaker ran dry (the newest few kept)
        if not filled:
            return
        self._played += filled
        if self._volume != 1.0:
            out *= self._volume
        for rid, start in self._watch:
            if start >= jb.read_pos or rid in self._first_audio:
                continue
            # out[i] is position (read_pos - filled + i) unless a flush skipped inside this read;
            # then the estimate is off by less than one block.
            lo = min(max(0, start - (jb.read_pos - filled)), filled)
            part = out[lo:filled]
            if part.size and max(part.max(), -part.min()) > _AUDIBLE:
                i = lo + int(np.argmax(np.abs(part) > _AUDIBLE))
                self._first_audio[rid] = self._last_first_audio = now + i / self.device_rate


class SpeakerOutput(BufferedSink):
    """The real speaker: a sounddevice output stream whose callback only copies from the ring."""

    def __init__(self, device: int | str | None = None, *, pre_roll_ms: float = 120,
                 volume: float = 1.0, block_ms: float = 20, latency: str | float = "low",
                 adaptive: PreRollConfig | None = PreRollConfig(), **kwargs: Any) -> None:  # fmt: skip
        """kwargs go to BufferedSink (capacity_s, high_water_ms, max_block_s, clock). Low
        latency so that a flush (barge-in) is heard at once; PortAudio's own buffer would
        otherwise keep playing for a few hundred ms. The pre-roll adapts (`media/preroll.py`)
        unless `adaptive` is None (then it is `pre_roll_ms`)."""
        self._sd = import_sounddevice()
        self.latency = latency
        self.device = find_output(device)  # raises AudioUnavailable with the plain message
        super().__init__(int(self.device.default_samplerate), pre_roll_ms=pre_roll_ms,
                         volume=volume, block_ms=block_ms, adaptive=adaptive, **kwargs)  # fmt: skip
        self._channels = min(2, self.device.channels)
        self._stream: Any = None
        self.device_underflows = 0  # PortAudio reported output underflow (callback too late)

    def start(self) -> None:
        if self._stream is not None:
            return
        stream_opened()  # from the lookup on: no re-scan may stop PortAudio under a half-done open
        try:
            self.device = reindex(self.device, "output")
            with pulse_target("PULSE_SINK", self.device.pulse_name):  # a Pulse sink: through "pulse"
                self._stream = self._sd.OutputStream(
                    device=self.device.index, samplerate=self.device_rate, channels=self._channels,
                    dtype="float32", blocksize=self.block_frames, latency=self.latency,
                    callback=self._callback,
                )  # fmt: skip
            self._stream.start()
        except Exception as exc:  # sounddevice.PortAudioError, ValueError for bad settings
            if self._stream is not None:
                self._stream.close()
            stream_closed()
            self._stream = None
            raise AudioUnavailable(NO_OUTPUT) from exc

    def _callback(self, outdata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        if status.output_underflow:
            self.device_underflows += 1
        self._render(outdata[:, 0], self.clock.now())
        for c in range(1, outdata.shape[1]):
            outdata[:, c] = outdata[:, 0]

    def close(self) -> None:
        super().close()
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.abort()
            stream.close()
            stream_closed()

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "device_underflows": self.device_underflows}
