"""Spoken turns for end-of-turn tests and benchmarks, made with the project's TTS engines (Piper
and espeak voices, two speeds): sentences with a 400–1,000 ms pause mid-sentence (after "and",
"so", "I would like to…", "um") and complete ones, as 16 kHz audio with where the pauses and the
end of speech are.

A pause is cut into the sentence spoken whole, so the words before it keep the prosody of an
unfinished sentence (a fragment spoken alone ends with a falling, finished tone): at a quiet
point near where Whisper hears the first word after the pause, checked by Whisper hearing the
rest begin with that word."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import re

import numpy as np

RATE = 16000
EDITION = 2  # bump when the turns made change (benches keep them in a cache keyed by it)
LOUD = 0.01  # a sample above this is speech (≈ −40 dBFS); leading and trailing quiet is cut
# (words before the pause, the rest): the pause comes where a speaker thinks mid-sentence
PAUSED = (
    ("I would like to", "book a table for two tonight."),
    ("I went to the shop and", "bought some bread and milk."),
    ("So", "what do you think about the plan?"),
    ("Um", "can you tell me what time it is?"),
    ("I was thinking that we could, um", "go to the beach tomorrow."),
    ("Can you remind me to call my mother and", "buy her some flowers?"),
    ("My favourite colour is blue, so", "I painted my room blue."),
    ("I would like to know", "how far away the moon is."),
    ("We could take the train, or", "maybe we should drive instead."),
    ("Please add eggs and", "a bag of rice to the list."),
)
COMPLETE = (
    "What is the capital of France?",
    "Tell me a joke about cats.",
    "Can you book a table for two tonight?",
    "I went to the shop and bought some bread.",
    "What time is it in Tokyo right now?",
    "Thanks, that is all for now.",
    "How far away is the moon?",
    "Please turn off the lights in the kitchen.",
)
# (engine, voice, speed): Piper's packaged voice and espeak's, each at two speaking rates
VOICES = (("espeak", "en-us", 1.0), ("piper", None, 1.0), ("espeak", "en-us+f3", 0.8), ("piper", None, 0.8))


@dataclass(frozen=True)
class SpokenTurn:
    """One user turn: `audio` (16 kHz mono float32) runs from its first voiced sample to its last
    (`end`, seconds); `pauses`: each mid-sentence pause as (start, end) seconds into it."""

    text: str
    audio: np.ndarray
    pauses: tuple[tuple[float, float], ...]
    voice: str

    @property
    def end(self) -> float:
        return self.audio.size / RATE

    @property
    def complete(self) -> bool:
        return not self.pauses


def make_tts(engine: str, voice: str | None, speed: float) -> Any:
    """A TTS engine at `speed` × its usual rate (desktop.model.tts.make_tts's `rate`)."""
    from desktop.model.tts import make_tts as build

    return build(engine, voice, speed)


def speak(tts: Any, text: str) -> np.ndarray:
    """`text` spoken at 16 kHz, its leading and trailing quiet cut."""
    import soxr

    audio = np.concatenate([np.asarray(c, np.float32).reshape(-1) for c in tts.synthesize(text)])
    audio = soxr.resample(audio, tts.sample_rate, RATE).astype(np.float32) if tts.sample_rate != RATE else audio
    loud = np.flatnonzero(np.abs(audio) > LOUD)
    return audio[loud[0] : loud[-1] + 1] if loud.size else audio[:0]


def valleys(audio: np.ndarray, lo: float, hi: float) -> list[int]:
    """Local minima of the 20 ms energy between `lo` and `hi` seconds, quietest first (samples
    at their centres): where a cut between two words can go."""
    win, hop = int(0.02 * RATE), int(0.005 * RATE)
    starts = np.arange(max(0, int(lo * RATE)), min(audio.size - win, int(hi * RATE)), hop)
    if starts.size < 3:
        return [int(np.clip((lo + hi) / 2 * RATE, 0, audio.size))]
    energy = np.array([float(np.mean(audio[s : s + win] ** 2)) for s in starts])
    low = [i for i in range(starts.size) if energy[i] <= energy[max(i - 1, 0)] and energy[i] <= energy[min(i + 1, starts.size - 1)]]
    return [int(starts[i] + win // 2) for i in sorted(low, key=lambda i: energy[i])]


def _word(w: str) -> str:
    return re.sub(r"[^a-z]", "", w.lower())


class WordTimes:
    """Whisper tiny.en (the packaged model) with word timestamps: the words of a clip and where
    each is."""

    def __init__(self) -> None:
        from faster_whisper import WhisperModel

        from desktop.media.asr import packaged_model_dir

        self.model = WhisperModel(str(packaged_model_dir()), device="cpu", compute_type="int8", cpu_threads=1)

    def __call__(self, audio: np.ndarray) -> list[tuple[str, float, float]]:
        segments, _ = self.model.transcribe(audio, language="en", beam_size=1, word_timestamps=True,
                                            condition_on_previous_text=False)  # fmt: skip
        return [(_word(w.word), w.start, w.end) for seg in segments for w in seg.words or ()]


def boundary(whole: np.ndarray, before: str, after: str, words: WordTimes, tries: int = 8) -> int | None:
    """The sample between `before` and `after` in `whole`, or None when it cannot be placed.
    Whisper's word times say roughly where the first word of `after` starts (it may drop an "um"
    or spell a word its way, so the word is looked for by name); the quiet valleys around there
    are tried, quietest first, until Whisper hears the rest begin with that word (not the word
    before it, nor the one after)."""
    first, k = _word(after.split()[0]), len(before.split())
    found = [w for w in words(whole)[max(0, k - 2) :] if w[0] == first]
    near = found[0][1] if found else whole.size / RATE * len(before) / (len(before) + len(after) + 1)
    for cut in valleys(whole, near - 0.45, near + 0.2)[:tries]:
        heard = words(whole[cut:])
        if heard and heard[0][0] == first:
            return cut
    return None


def paused_turn(tts: Any, before: str, after: str, pause_s: float, voice: str,
                word_times: WordTimes | None = None) -> SpokenTurn | None:  # fmt: skip
    """`before after` spoken whole, with `pause_s` of silence cut in between the two parts (None
    when Whisper could not place the cut)."""
    whole = speak(tts, f"{before} {after}")
    cut = boundary(whole, before, after, word_times or WordTimes())
    if cut is None:
        return None
    fade = min(int(0.01 * RATE), cut)  # no click at the cut
    head, tail = whole[:cut].copy(), whole[cut:].copy()
    head[head.size - fade :] *= np.linspace(1, 0, fade, dtype=np.float32)
    tail[:fade] *= np.linspace(0, 1, fade, dtype=np.float32)
    gap = np.zeros(int(round(pause_s * RATE)), np.float32)
    return SpokenTurn(f"{before} … {after}", np.concatenate([head, gap, tail]),
                      ((head.size / RATE, (head.size + gap.size) / RATE),), voice)


def spoken_turns(n_paused: int = 20, n_complete: int = 8, voices: tuple = VOICES, seed: int = 0) -> Iterator[SpokenTurn]:
    """`n_paused` sentences with a pause of 400–1,000 ms and `n_complete` whole ones, the voices
    taken in turn (each engine is built once); the pauses' lengths from `seed`. A sentence whose
    cut Whisper cannot place is left out (the next sentence and voice take its place)."""
    rng = np.random.default_rng(seed)
    engines: dict[tuple, Any] = {}
    word_times = WordTimes() if n_paused else None

    def engine(i: int) -> tuple[Any, str]:
        key = voices[i % len(voices)]
        if key not in engines:
            engines[key] = make_tts(*key)
        name, voice, speed = key
        return engines[key], f"{name}:{voice or 'default'} ×{speed:g}"

    made = 0
    for i in range(4 * n_paused):  # a cut Whisper cannot place is left out: the next one is made
        if made == n_paused:
            break
        tts, label = engine(i)
        before, after = PAUSED[i % len(PAUSED)]
        turn = paused_turn(tts, before, after, float(rng.uniform(0.4, 1.0)), label, word_times)
        if turn is not None:
            made += 1
            yield turn
    for i in range(n_complete):
        tts, label = engine(i)
        text = COMPLETE[i % len(COMPLETE)]
        yield SpokenTurn(text, speak(tts, text), (), label)
