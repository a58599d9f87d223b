"""Ducking: while the assistant speaks, the user's voice on the microphone mutes the speaker at
once, before the VAD has confirmed speech (that takes 60–100 ms more); if the VAD does not confirm
within `hold_s`, the volume comes back and the reply goes on where it is (and `on_false_alarm`
is told). So a barge-in is silent within a frame or two of its onset, and a cough costs a short
dip, not the reply. The user's voice is seen either way: the echo canceller's double-talk
detector (raw microphone against what the speaker played: fast even when the user starts quieter
than the echo) or a sudden rise of the cleaned level (no far-end reference: headphones, or a
canceller without one). The ducker only decides; the Voice, the speaker's owner, ducks it and
gives the user's volume back."""

from __future__ import annotations

from typing import Callable, Protocol

RISE_DB = 12.0  # over the level the microphone had while the assistant spoke
FLOOR_DB = -50.0  # never duck for anything quieter than this
HOLD_S = 0.3


class Duckable(Protocol):
    """What the ducker needs of the Voice."""

    available: bool  # False: no sound output, nothing to duck

    def duck(self) -> None: ...

    def unduck(self) -> None: ...


class Ducker:
    def __init__(self, voice: Duckable, rise_db: float = RISE_DB, floor_db: float = FLOOR_DB, hold_s: float = HOLD_S,
                 on_false_alarm: Callable[[], None] | None = None) -> None:  # fmt: skip
        self.voice, self.rise_db, self.floor_db, self.hold_s = voice, rise_db, floor_db, hold_s
        self.on_false_alarm = on_false_alarm
        self.background = floor_db  # a slow average of the cleaned level during playback
        self.until: float | None = None  # ducked until this clock time (None: not ducked)
        self.ducks = 0
        self.false_alarms = 0

    @property
    def ducked(self) -> bool:
        return self.until is not None

    def frame(self, level_db: float, t: float, speaking: bool, near_talk: bool = False) -> None:
        """One cleaned frame's level at clock time t; `speaking`: the assistant's reply is playing;
        `near_talk`: the double-talk detector heard the user in this frame."""
        if not speaking or not self.voice.available:
            self.release()
            return
        if self.until is not None:
            if t >= self.until:
                self.release()  # not speech after all: the reply goes on
                self.false_alarms += 1
                if self.on_false_alarm is not None:
                    self.on_false_alarm()
            return
        if near_talk or level_db > max(self.background + self.rise_db, self.floor_db):
            self.voice.duck()
            self.until, self.ducks = t + self.hold_s, self.ducks + 1
            return
        self.background += 0.05 * (level_db - self.background)

    def release(self) -> None:
        """Volume back (after a confirmed barge-in has stopped the reply, or a false alarm)."""
        if self.until is not None:
            self.voice.unduck()
            self.until = None
