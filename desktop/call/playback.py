"""What the Voice reports about the call's reply, on its threads: the first sound (the reply
started: the turn logic moves to speaking), the end (the user's turn again), and the gaps the
speaker ran dry in between, which go into the turn's metrics."""

from __future__ import annotations

from typing import Any, Callable

from desktop.call.events import CallEvent
from desktop.call.replies import CallReply, Replies
from desktop.call.turn_taking import TurnTaking
from desktop.media.clock import Clock
from desktop.speech.voice_audio import VoiceEvent, VoiceEventKind


class Playback:
    """`on_voice` is the call's listener on the Voice (added at its start, removed at its end)."""

    def __init__(self, voice: Any, replies: Replies, turn_taking: TurnTaking, clock: Clock,
                 emit: Callable[[CallEvent], None]) -> None:  # fmt: skip
        self.voice, self.replies, self.turn_taking, self.clock, self.emit = voice, replies, turn_taking, clock, emit

    def on_voice(self, event: VoiceEvent) -> None:
        reply = self.replies.current
        if event.request_id is None or event.request_id != reply.request_id or event.replay:
            return
        state = self.turn_taking.state
        if event.kind is VoiceEventKind.STARTED:
            reply.metrics.first_audio_t = self.voice.first_audio_at(event.request_id) or self.clock.now()
            reply.playback = self._playback()
            self.turn_taking.do(state.reply_started)
        elif event.kind in (VoiceEventKind.FINISHED, VoiceEventKind.FAILED) and not event.stopped:
            self._played(reply)
            self.turn_taking.do(state.reply_finished)

    def _playback(self) -> tuple[float, int] | None:
        """(seconds of silence from running dry, underruns) of the speaker, where it can tell."""
        s = self.voice.playback_stats()
        return None if s is None else (s.starved_s, s.underruns)

    def _played(self, reply: CallReply) -> None:
        """The reply played out: its gaps and drift go into its metrics (reported again). The
        drift is the silence the speaker played while it ran dry, counted by the speaker itself:
        wall-clock readings around the device's read-ahead came out below zero."""
        start, end = reply.playback, self._playback()
        if start is None or end is None:
            return
        reply.metrics.underruns = end[1] - start[1]
        reply.metrics.drift_ms = max(end[0] - start[0], 0.0) * 1000.0
        self.emit(CallEvent("metrics", metrics=reply.metrics))
