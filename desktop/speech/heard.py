"""What the user actually heard of a spoken reply: the TTS segments' text and audio durations,
mapped against the seconds the speaker played. On barge-in the assistant's turn in the context is
trimmed to this text, so the model's history is what the user heard (the Realtime API's
"truncation"). Whole segments that played out count whole; the segment cut in the middle counts
by the share of its audio played, rounded down to whole words."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from desktop.bounded import BoundedDict


@dataclass(slots=True)
class _Spoken:
    text: str
    seconds: float = 0.0


@dataclass(slots=True)
class SpokenLog:
    """One reply: segments in the order they were spoken, each with the audio made for it."""

    segments: dict[int, _Spoken] = field(default_factory=dict)  # sequence → segment

    def add_segment(self, sequence: int, text: str) -> None:
        self.segments.setdefault(sequence, _Spoken(text)).text = text

    def add_audio(self, sequence: int, samples: int, sample_rate: int) -> None:
        """Audio made for a segment (before the speaker's own resampling: seconds are the same)."""
        if samples > 0 and sample_rate > 0:
            self.segments.setdefault(sequence, _Spoken("")).seconds += samples / sample_rate

    @property
    def spoken_text(self) -> str:
        return join(s.text for _, s in sorted(self.segments.items()))

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.segments.values())

    def heard_text(self, played_s: float) -> str:
        """The text of the first `played_s` seconds of this reply's audio."""
        heard, left = [], played_s
        for _, seg in sorted(self.segments.items()):
            if seg.seconds <= 0 or left <= 0:
                break
            if left >= seg.seconds - 1e-6:
                heard.append(seg.text)
                left -= seg.seconds
                continue
            words = seg.text.split()
            cut = int(len(words) * left / seg.seconds)
            if cut:
                heard.append(" ".join(words[:cut]))
            break
        return join(heard)


class SpokenLogs:
    """The SpokenLog of each of the newest `keep` replies, by request id. Thread-safe."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._logs: BoundedDict[str, SpokenLog] = BoundedDict(keep)

    def add_segment(self, request_id: str, sequence: int, text: str) -> None:
        with self._lock:
            self._log(request_id).add_segment(sequence, text)

    def add_audio(self, request_id: str, sequence: int, samples: int, sample_rate: int) -> None:
        with self._lock:
            self._log(request_id).add_audio(sequence, samples, sample_rate)

    def heard_text(self, request_id: str, played_s: float) -> str:
        """The text of the reply's first `played_s` seconds ("" for a reply not spoken or kept)."""
        with self._lock:
            log = self._logs.get(request_id)
            return log.heard_text(played_s) if log is not None else ""

    def _log(self, request_id: str) -> SpokenLog:  # lock held
        log = self._logs.get(request_id)
        if log is None:
            log = self._logs[request_id] = SpokenLog()
        return log


def join(parts) -> str:
    return " ".join(p.strip() for p in parts if p and p.strip())
