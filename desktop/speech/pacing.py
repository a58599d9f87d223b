"""What the TTS stage tells the speaker before each chunk it writes (`AudioSink.pace`): how fast
the synthesiser made that chunk, and how much audio the next one should hold, from its text."""

from __future__ import annotations

from desktop.speech.segmenter import count_words


class Pacing:
    """Turns text still to be spoken into seconds of audio, with the seconds per word measured
    on the segments already spoken (the voice's speaking rate). Used by the TTS thread only."""

    def __init__(self, s_per_word: float = 0.35, weight: float = 0.3) -> None:
        self.s_per_word = s_per_word
        self._weight = weight

    def spoken(self, text: str, audio_s: float) -> None:
        """A segment was synthesised: `text` gave `audio_s` seconds."""
        words = count_words(text)
        if words >= 3 and audio_s > 0:  # a word or two says little about the rate
            w = self._weight
            self.s_per_word = (1 - w) * self.s_per_word + w * audio_s / words

    def seconds(self, text: str | None) -> float | None:
        """Seconds of audio `text` should make; None stays None (not known yet)."""
        return None if text is None else count_words(text) * self.s_per_word
