"""How much audio the speaker waits for before it plays: a pre-roll that follows how fast the
synthesiser makes audio (its real-time factor) and the underruns seen. Pure policy, no threads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PreRollConfig:
    """floor_ms: the pre-roll that covers scheduling jitter, before any synthesis is counted; it
    starts at `start_ms`, is raised after an underrun and lowered slowly after clean replies,
    always within [min_ms, max_ms]. margin: the synthesiser's expected time is stretched by this.
    unknown_s: how much audio the next chunk is assumed to hold when the text to come is not known
    yet, until chunks are seen; then the average chunk (assuming a long sentence each time held
    the start of most replies for a second, to prevent underruns that did not come)."""

    start_ms: float = 120.0
    min_ms: float = 40.0
    max_ms: float = 400.0
    margin: float = 1.1
    unknown_s: float = 3.0
    raise_factor: float = 1.5  # an underrun multiplies the floor (and adds the silence it left)
    lower_ms: float = 10.0  # a reply without an underrun lowers the floor this much
    rtf_weight: float = 0.3  # weight of the newest measure in the real-time factor's average

    def __post_init__(self) -> None:
        if not 0 <= self.min_ms <= self.start_ms <= self.max_ms:
            raise ValueError(f"need 0 <= min_ms <= start_ms <= max_ms, not {self.min_ms}, "
                             f"{self.start_ms}, {self.max_ms}")
        if self.margin < 1 or self.unknown_s <= 0 or self.raise_factor < 1 or self.lower_ms < 0:
            raise ValueError("margin and raise_factor must be at least 1, unknown_s positive, lower_ms >= 0")
        if not 0 < self.rtf_weight <= 1:
            raise ValueError(f"rtf_weight must be in (0, 1], not {self.rtf_weight}")


class AdaptivePreRoll:
    """The pre-roll of one speaker. The synthesiser reports each chunk it made (`measured`: its
    seconds of audio and the seconds it took); `lead_s(next_s)` is then how much audio must be
    buffered before playing starts, so that the next chunk (`next_s` seconds of audio; None: not
    known yet, an average chunk) is made before what is buffered has played:
    floor + margin × RTF × next. On a fast machine that is little more than the floor; on a slow
    one it holds the start until enough is buffered to hide the next synthesis (the speaker
    counts the time it waits with audio buffered towards the lead: only the deficit is waited,
    not the whole next chunk). The speaker tells
    `underrun(starved_s)` when it ran dry (the floor goes up at once) and `clean_reply()` when a
    reply played without running dry (the floor comes down slowly)."""

    def __init__(self, config: PreRollConfig = PreRollConfig()) -> None:
        self.config = config
        self.floor_s = config.start_ms / 1000
        self.rtf: float | None = None  # None until the first chunk is measured
        self.unknown_s = config.unknown_s
        self._rid: str | None = None  # the request being written
        self._paced = False  # ...and whether its synthesiser paces it
        self._dry = False  # ...and whether the speaker ran dry while it played
        self._underruns, self._starved_s = 0, 0.0  # the speaker's counters at the last look

    def writing(self, rid: str, *, paced: bool, underruns: int, starved_s: float) -> float | None:
        """The sink is about to write for `rid` (`paced`: its synthesiser reports each chunk);
        `underruns` and `starved_s` are the speaker's running totals. Raises the floor at once if
        the speaker ran dry since the last look; when a new request begins, lowers it if the
        last paced one played clean. Returns the lead to use now for a request nobody paces (a
        recording played back waits for the floor only), else None (keep the gate)."""
        if underruns != self._underruns:
            self.underrun(max(0.0, starved_s - self._starved_s))
            self._dry = True
        self._underruns, self._starved_s = underruns, starved_s
        if rid == self._rid:
            return None
        if self._paced and not self._dry:
            self.clean_reply()
        self._rid, self._paced, self._dry = rid, paced, False
        return None if paced else self.floor_s

    def measured(self, audio_s: float, synth_s: float) -> None:
        """One chunk made: `audio_s` seconds of audio in `synth_s` seconds."""
        if audio_s <= 0 or synth_s < 0:
            return
        rtf = synth_s / audio_s
        w = self.config.rtf_weight
        # The average, but never below the newest measure: a machine that just got slower is
        # believed at once, one that got faster only gradually.
        self.rtf = rtf if self.rtf is None else max(rtf, (1 - w) * self.rtf + w * rtf)
        self.unknown_s = (1 - w) * self.unknown_s + w * audio_s  # what a chunk holds, on average

    def lead_s(self, next_s: float | None = None) -> float:
        """Seconds of audio to buffer before playing, given the next chunk's length (None: an
        average chunk's)."""
        if self.rtf is None:
            return self.floor_s
        next_s = self.unknown_s if next_s is None else max(next_s, 0.0)
        return self.floor_s + self.config.margin * self.rtf * next_s

    def underrun(self, starved_s: float = 0.0) -> None:
        """The speaker ran dry, leaving `starved_s` of silence: raise the floor."""
        c = self.config
        self.floor_s = min(c.max_ms / 1000, max(self.floor_s * c.raise_factor, self.floor_s + starved_s))

    def clean_reply(self) -> None:
        """A reply played through without running dry: lower the floor a little."""
        c = self.config
        self.floor_s = max(c.min_ms / 1000, self.floor_s - c.lower_ms / 1000)
