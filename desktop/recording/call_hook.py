"""Records a voice call through the hooks a Call and the Voice already offer: the raw microphone
frames (`Call.frame_taps`) as the user track, what the speaker played (`Voice.tap`) as the AI
track, and the call's events (`Call.listeners`) as timeline lines. Nothing here blocks: audio is
copied into chunkers, lines are queued on the recorder's lanes.

Why the raw microphone and not the echo-cancelled one: it is what the user really said, in the
room they said it in; the cancelled signal is the call's working copy (it mutes double talk and
can hold artefacts), and a raw recording lets a bad turn be replayed to see what the VAD and ASR
were given. The assistant's side comes from the speaker, so the echo in the user track is audible
as such on replay (left/right apart).

Off the reply's critical path: from the end of the user's turn (the call enters TRANSCRIBING) to
the reply's first audio (the speaker plays its first block with sound after the call entered
SPEAKING; without a speaker, SPEAKING; any other phase ends it too), the writer pool is held —
encoding and disk writes wait (at most `hold_s`, and at most one chunk), so they do not take the
CPU from the final transcript, the first token and the first synthesised audio. The hooks
themselves only copy into a preallocated buffer or queue a line."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from desktop.call.state import CallPhase
from desktop.recording.chunker import AudioChunker
from desktop.recording.lanes import HOLD_MAX_S
from desktop.recording.writer import SessionRecorder

if TYPE_CHECKING:
    from desktop.media.audio_out import PlayedAudio

log = logging.getLogger(__name__)
METRIC_FIELDS = ("eos_to_audio_ms", "first_sound_ms", "asr_ms", "ttft_ms", "cached_tokens", "new_tokens",
                 "kv_tokens", "underruns", "drift_ms")
REPLY_ON_ITS_WAY = frozenset((CallPhase.TRANSCRIBING, CallPhase.THINKING))  # end of speech → first audio


class CallRecording:
    """Feeds one call into `recorder`. `attach(call, speaker)` at the call's start; the call's
    `ended` event (or `finish()`) flushes the last chunks and closes the recorder; `on_closed`
    gets the closed recorder (e.g. to build its replay files). `hold_s`: the longest the writes
    wait for a reply's first audio (0: never held)."""

    def __init__(self, recorder: SessionRecorder, *, mic_rate: int = 16000,
                 on_closed: Callable[[SessionRecorder], None] | None = None, hold_s: float = HOLD_MAX_S) -> None:
        self.recorder, self.on_closed, self.hold_s = recorder, on_closed, hold_s
        self.user = AudioChunker(self._chunk("user"), mic_rate)
        self.ai: AudioChunker | None = None
        self.turn = 0
        self._answers: dict[int, tuple[str, str | None]] = {}  # turn → (assistant text, heard) not yet written
        self._detach: list[Callable[[], None]] = []
        self._closed: Future[SessionRecorder] | None = None
        self._awaiting_sound = False  # SPEAKING: the hold ends at the speaker's first block with sound

    def attach(self, call: Any, speaker: PlayedAudio | None = None) -> None:
        """Tap `call` (listeners, frame_taps) and `speaker`, what plays the AI's voice: the Voice
        (or a sink in tests; None: no AI track)."""
        call.listeners.append(self.on_event)
        call.frame_taps.append(self.on_mic)
        self._detach += [lambda: _remove(call.listeners, self.on_event), lambda: _remove(call.frame_taps, self.on_mic)]
        video = getattr(call, "video", None)
        if video is not None:  # camera frames as the call samples them (1/s), while it is on
            video.taps.append(self.on_frame)
            self._detach.append(lambda: _remove(video.taps, self.on_frame))
        if speaker is not None:
            self.ai = AudioChunker(self._chunk("ai"), int(speaker.device_rate), gated=True)
            self._detach.append(speaker.tap(self.on_played))

    # ------------------------------------------------------------------ taps (device threads)

    def on_mic(self, samples: np.ndarray, t: float) -> None:
        self.user.feed(samples, t)

    def on_frame(self, frame: Any) -> None:
        self.recorder.frame(frame.image, self.recorder.at(frame.t))
        if not self.recorder.meta.get("video"):
            self.recorder.update_meta(video=True)

    def on_played(self, block: np.ndarray, t: float) -> None:
        if self.ai is not None and self.ai.feed(block, t) and self._awaiting_sound:
            self._awaiting_sound = False  # the reply is heard: the writers may run
            self.recorder.release()

    def _chunk(self, track: str) -> Callable[[list[np.ndarray], float, int], None]:
        def emit(blocks: list[np.ndarray], start: float, rate: int) -> None:
            self.recorder.audio(track, blocks, self.recorder.at(start), rate)
        return emit

    # ------------------------------------------------------------------ the call's events (its threads)

    def on_event(self, event: Any) -> None:
        rec, kind = self.recorder, event.kind
        if kind == "level":
            return
        if kind == "phase":
            self._awaiting_sound = False
            if event.phase in REPLY_ON_ITS_WAY:
                if self.hold_s > 0:
                    rec.hold(self.hold_s)
            elif event.phase is CallPhase.SPEAKING and self.ai is not None:
                self._awaiting_sound = True  # queued for the speaker, not heard yet (its pre-roll)
            else:
                rec.release()
        elif kind == "partial":
            rec.event("user_partial", text=event.text, turn=self.turn + 1)
        elif kind == "user":
            self._close_turns()
            self.turn += 1
            rec.event("user_text", text=event.text, turn=self.turn)
        elif kind == "assistant":
            rec.event("assistant_delta", text=event.text, turn=self.turn)
        elif kind == "cut":  # only the user talking over the reply is a barge-in; hanging up is not
            reason = getattr(event, "reason", "") or "barge_in"
            if reason == "barge_in":
                rec.event("barge_in", turn=self.turn, heard=event.text)
            else:
                rec.event("reply_stopped", turn=self.turn, heard=event.text, reason=reason)
        elif kind == "metrics" and event.metrics is not None:
            m = event.metrics
            figures = {k: v for k in METRIC_FIELDS if (v := getattr(m, k, None)) is not None}
            rec.event("turn_metrics", turn=m.turn, **{k: round(v, 2) if isinstance(v, float) else v
                                                      for k, v in figures.items()})
            self._answers[m.turn] = (m.assistant_text, m.heard)
        elif kind == "error":
            rec.event("note", text=event.text)
        elif kind == "ended":
            self.finish()

    def _close_turns(self) -> None:
        """The final assistant text of the turns that are over, once each (with `heard` when a
        barge-in cut it: the metrics come again after the cut)."""
        for turn, (text, heard) in sorted(self._answers.items()):
            fields: dict[str, Any] = {"text": text, "turn": turn}
            if heard is not None:
                fields["heard"] = heard
            self.recorder.event("assistant_text", **fields)
        self._answers.clear()

    def finish(self) -> Future[SessionRecorder]:
        """Detach, write what is buffered and close the recorder (returns at once)."""
        if self._closed is not None:
            return self._closed
        for undo in self._detach:
            undo()
        self.recorder.release()
        self.user.flush()
        if self.ai is not None:
            self.ai.flush()
        self._close_turns()
        self._closed = self.recorder.close()
        if self.on_closed is not None:
            callback = self.on_closed
            self._closed.add_done_callback(lambda fut: _safe(callback, fut.result()))
        return self._closed


def _remove(items: list[Any], item: Any) -> None:
    if item in items:
        items.remove(item)


def _safe(fn: Callable[[SessionRecorder], None], rec: SessionRecorder) -> None:
    try:
        fn(rec)
    except Exception:
        log.exception("after-recording step failed")
