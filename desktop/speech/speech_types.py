"""Types that cross the output pipeline: the TTS protocol it drives (the audio sink's is
media/audio_out.AudioSink), and the events it emits (text deltas, segments, audio chunks, done, error)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Protocol

import numpy as np


class TTSEngine(Protocol):
    """Text to speech: float32 mono chunks at `sample_rate`; `synthesize` may raise."""

    sample_rate: int

    def synthesize(self, text: str) -> Iterator[np.ndarray]: ...


@dataclass(frozen=True, slots=True)
class TextDelta:
    request_id: str
    sequence: int
    text: str
    is_last: bool = False


@dataclass(frozen=True, slots=True)
class Segment:
    request_id: str
    sequence: int
    text: str  # what is spoken (markdown noise removed); "" only on a closing is_last segment
    is_last: bool
    t_complete: float  # clock time when this text was complete (cut by the segmenter)


@dataclass(frozen=True, slots=True)
class AudioChunk:
    request_id: str
    sequence: int
    samples: np.ndarray = field(compare=False)  # float32 mono; empty on the closing is_last chunk
    sample_rate: int
    is_last: bool
    segment: int = -1  # the Segment.sequence this audio speaks


@dataclass(frozen=True, slots=True)
class PipelineError:
    request_id: str
    code: str  # "tts_failed", "audio_failed", "pipeline_failed"
    message: str


@dataclass(frozen=True, slots=True)
class PipelineDone:
    request_id: str
    stats: dict = field(default_factory=dict)
