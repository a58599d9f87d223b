"""Playback of a recording without Qt: a position that moves with a clock at a chosen speed, and
the mixed audio fed a little ahead of it to a sink (the app's speaker). The UI calls `tick()`."""

from __future__ import annotations

import itertools
from typing import Callable

from desktop.media.audio_out import AudioOut, AudioUnavailable
from desktop.media.clock import Clock, RealClock
from desktop.recording.mix import Mix

SPEEDS = (0.5, 1.0, 1.5, 2.0)
_ids = itertools.count(1)


class Player:
    """play / pause / toggle / seek / set_speed; `position` (seconds) follows the clock while
    playing and stops at `duration`. With a sink and audio, `tick()` keeps `lead_s` of audio queued
    ahead of the position. Speed changes the pitch too: the mix is played at speed × its rate
    (plain resampling, no time-stretch). `on_state(playing)` is called when play starts or stops."""

    def __init__(self, duration: float, mix: Mix | None = None, sink: AudioOut | None = None, *,
                 clock: Clock | None = None, lead_s: float = 0.3) -> None:
        self.duration = max(0.0, float(duration))
        self.mix = mix if mix is not None and not mix.empty else None
        self.sink = sink
        self.clock: Clock = clock or RealClock()
        self.lead_s = lead_s
        self.speed = 1.0
        self.on_state: Callable[[bool], None] | None = None
        self._anchor_pos = 0.0  # position at _anchor_t
        self._anchor_t: float | None = None  # clock time play started; None while paused
        self._rid: str | None = None  # the sink request being fed
        self._fed = 0.0  # position up to which audio was queued
        self._ended_feed = False
        self.error: str | None = None  # why the sound stopped (the speaker could not be opened)

    # ------------------------------------------------------------------ state

    @property
    def playing(self) -> bool:
        return self._anchor_t is not None

    @property
    def position(self) -> float:
        if self._anchor_t is None:
            return self._anchor_pos
        pos = self._anchor_pos + (self.clock.now() - self._anchor_t) * self.speed
        return min(pos, self.duration)

    @property
    def playable(self) -> bool:
        """False when there is nothing to play (no length: empty, or nothing recorded yet)."""
        return self.duration > 0

    @property
    def audible(self) -> bool:
        return self.mix is not None and self.sink is not None

    # ------------------------------------------------------------------ controls

    def play(self) -> None:
        if self.playing or not self.playable:
            return
        if self._anchor_pos >= self.duration:  # at the end: play again from the start
            self._anchor_pos = 0.0
        self._anchor_t = self.clock.now()
        self._restart_audio()
        if self.on_state:
            self.on_state(True)

    def pause(self) -> None:
        if not self.playing:
            return
        self._anchor_pos, self._anchor_t = self.position, None
        self._stop_audio()
        if self.on_state:
            self.on_state(False)

    def toggle(self) -> None:
        self.pause() if self.playing else self.play()

    def seek(self, t: float) -> None:
        t = min(max(0.0, t), self.duration)
        self._anchor_pos = t
        if self.playing:
            self._anchor_t = self.clock.now()
            self._restart_audio()

    def set_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be positive, not {speed}")
        pos = self.position
        self.speed = float(speed)
        self.seek(pos)

    def tick(self) -> float:
        """Advance: stop at the end, queue audio up to position + lead. Returns the position."""
        pos = self.position
        if self.playing and pos >= self.duration:
            self.pause()
            self._anchor_pos = self.duration
            return self.duration
        if self.playing:
            self._feed(pos)
        return pos

    def close(self) -> None:
        self.pause()

    # ------------------------------------------------------------------ audio

    def _restart_audio(self) -> None:
        self._stop_audio()
        if not self.audible:
            return
        assert self.mix is not None and self.sink is not None
        try:
            self.sink.start()  # the speaker opens its stream on first use
        except AudioUnavailable as exc:  # play on silently, and say why once
            self.sink, self.error = None, exc.message
            return
        self._rid = f"recording-{next(_ids)}"
        self._fed, self._ended_feed = self._anchor_pos, False
        self.mix.seek(self._anchor_pos)
        self._feed(self._anchor_pos)

    def _stop_audio(self) -> None:
        if self._rid is not None and self.sink is not None:
            self.sink.flush(self._rid)
        self._rid = None

    def _feed(self, pos: float) -> None:
        if self._rid is None or self._ended_feed or self.mix is None or self.sink is None:
            return
        target = min(self.duration, pos + self.lead_s * self.speed)
        n = int(round((target - self._fed) * self.mix.rate))
        if n > 0:
            self.sink.write(self._rid, self.mix.read(n), int(round(self.mix.rate * self.speed)))
            self._fed += n / self.mix.rate
        if target >= self.duration:
            self.sink.end(self._rid)
            self._ended_feed = True
