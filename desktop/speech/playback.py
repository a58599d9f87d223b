"""The speaker as the Voice holds it: its volume (set, ducked, given back), taps on what it
played, how much of a reply was heard and when it first sounded, and its counters as a record.
Only the Voice has one; outer objects ask the Voice, never the speaker."""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields
from typing import Any, Callable

from desktop.media.audio_out import AudioOut, AudioSink, Tap


@dataclass(frozen=True, slots=True)
class PlaybackStats:
    """The speaker's counters since it opened."""

    underruns: int = 0  # times it ran dry (a gap was heard)
    starved_s: float = 0.0  # the silence it played while dry
    played_s: float = 0.0
    buffered_ms: float = 0.0
    first_audio_at: float | None = None  # clock time of the latest reply's first sound
    device_rate: int = 0
    dropped_s: float = 0.0  # audio given up on because the device stopped draining
    device_underflows: int = 0  # the real speaker: PortAudio called back too late

    @classmethod
    def of(cls, stats: dict[str, Any]) -> PlaybackStats:
        return cls(**{f.name: stats[f.name] for f in fields(cls) if f.name in stats})


def _nothing() -> None:
    pass


class Playback:
    """The read side and the volume of `sink` (None: no sound output; then nothing was played
    and there is nothing to duck). Ducking silences the speaker at once and keeps the volume the
    user set, given back by `unduck` (also a volume set while ducked). Thread-safe."""

    def __init__(self, sink: AudioSink | None) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self._volume = sink.volume if sink is not None else 1.0
        self._ducked = False

    @property
    def device_rate(self) -> int:
        return self._sink.device_rate if self._sink is not None else 0

    @property
    def block_frames(self) -> int:
        return self._sink.block_frames if self._sink is not None else 0

    # ---- volume --------------------------------------------------------------------------------
    def set_volume(self, volume: float) -> None:
        with self._lock:
            self._volume = volume
            if self._sink is not None and not self._ducked:
                self._sink.volume = volume

    def duck(self) -> None:
        with self._lock:
            if self._sink is not None and not self._ducked:
                self._ducked, self._sink.volume = True, 0.0

    def unduck(self) -> None:
        with self._lock:
            if self._sink is not None and self._ducked:
                self._ducked, self._sink.volume = False, self._volume

    # ---- what was played ---------------------------------------------------------------------
    def tap(self, fn: Tap) -> Callable[[], None]:
        return self._sink.tap(fn) if self._sink is not None else _nothing

    def heard_s(self, sink_id: str) -> float:
        return self._sink.heard_s(sink_id) if self._sink is not None else 0.0

    def queued_s(self, sink_id: str) -> float:
        return self._sink.queued_s(sink_id) if self._sink is not None else 0.0

    def first_audio_at(self, sink_id: str) -> float | None:
        return self._sink.first_audio_at(sink_id) if self._sink is not None else None

    def stats(self) -> PlaybackStats | None:
        return PlaybackStats.of(self._sink.stats()) if self._sink is not None else None


class LentAudio:
    """The speaker as the Voice lends it to the recordings player: its own audio under its own
    ids, nothing more (an AudioOut)."""

    def __init__(self, sink: AudioSink) -> None:
        self._sink = sink

    def start(self) -> None:
        self._sink.start()

    def write(self, request_id: str, samples: Any, sample_rate: int) -> None:
        self._sink.write(request_id, samples, sample_rate)

    def end(self, request_id: str) -> None:
        self._sink.end(request_id)

    def flush(self, request_id: str | None = None) -> None:
        self._sink.flush(request_id)


def lent(sink: AudioSink | None) -> AudioOut | None:
    return LentAudio(sink) if sink is not None else None
