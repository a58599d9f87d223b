"""The voice's records: the events it reports, and the audio of the last spoken replies kept for
Replay within a count and a duration (as int16: half the memory)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from desktop.bounded import BoundedDict

KEEP_REPLIES = 50  # replies whose audio is kept for Replay
KEEP_SECONDS = 20 * 60.0  # and at most this much audio in all (~53 MB at 22 kHz)


class VoiceEventKind(str, Enum):
    LOADING = "loading"  # the TTS engine is being loaded (first use, or after a new engine)
    READY = "ready"  # it is loaded
    STARTED = "started"  # the first audio of a reply (or of a replay) went to the speaker
    FINISHED = "finished"  # it has played to its end, or was stopped (`stopped`)
    FAILED = "failed"  # it could not be spoken; `message` says why in plain words


@dataclass(frozen=True, slots=True)
class VoiceEvent:
    kind: VoiceEventKind
    request_id: str | None = None
    message: str = ""
    replay: bool = False
    stopped: bool = False


@dataclass(slots=True, eq=False)
class _Kept:
    rate: int
    chunks: list[np.ndarray] = field(default_factory=list)  # int16
    samples: int = 0


class KeptAudio:
    """Each reply's audio by request id, the newest `keep` replies and at most `keep_s` seconds in
    all (the oldest go first; the newest is always kept). Thread-safe."""

    def __init__(self, keep: int = KEEP_REPLIES, keep_s: float = KEEP_SECONDS) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        self._lock = threading.Lock()
        self._kept: BoundedDict[str, _Kept] = BoundedDict(
            keep, max_size=keep_s, size=lambda kept: kept.samples / kept.rate, keep_newest=1)

    def add(self, request_id: str, samples: np.ndarray, rate: int) -> None:
        """Append float32 samples in [-1, 1] to the reply's audio."""
        pcm = np.rint(np.clip(samples, -1.0, 1.0) * 32767).astype(np.int16)
        with self._lock:
            kept = self._kept.get(request_id)
            if kept is None:
                kept = self._kept[request_id] = _Kept(rate)
            if rate != kept.rate:
                return  # one reply, one engine: cannot happen short of a bug
            kept.chunks.append(pcm)
            kept.samples += pcm.size
            self._kept.grew(pcm.size / rate)

    def get(self, request_id: str) -> tuple[np.ndarray, int] | None:
        """(float32 mono samples, rate), or None when nothing of this reply is kept."""
        with self._lock:
            kept = self._kept.get(request_id)
            if kept is None or not kept.samples:
                return None
            if len(kept.chunks) > 1:
                kept.chunks = [np.concatenate(kept.chunks)]
            data, rate = kept.chunks[0], kept.rate
        return data.astype(np.float32) / np.float32(32767), rate

    def __contains__(self, request_id: object) -> bool:
        with self._lock:
            return request_id in self._kept

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    @property
    def seconds(self) -> float:
        return float(self._kept.total)
