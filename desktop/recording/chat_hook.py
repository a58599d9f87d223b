"""Records chat conversations when the chat setting is on: `observe(reply)` is handed each Reply
as it starts (a hook of the chat page); one session per conversation, opened when its first reply
brings text (a refused or empty reply leaves no recording) and closed when it has been idle a while
or the app closes. Lines: the user's text and images, the streamed deltas, the final text and the
reply's token figures; with the Voice on, the spoken reply as the AI track (`voice()`)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from desktop.bounded import BoundedDict
from desktop.recording.writer import SessionRecorder

log = logging.getLogger(__name__)

IDLE_CLOSE_S = 15 * 60.0  # a conversation's session ends after this long without a reply
STAT_FIELDS = ("ttft_ms", "cached_tokens", "input_tokens", "generated_tokens", "prefill_ms", "decode_ms",
               "queue_ms", "finish_reason")


@dataclass(slots=True)
class _Open:
    recorder: SessionRecorder
    turn: int = 0
    last: float = 0.0


class ChatRecording:
    """`open_session(title)` makes a chat SessionRecorder; `enabled()` is read at each reply (the
    setting can change at any time); `voice()`: the chat's Voice (None: none), whose spoken replies
    are recorded. Runs on the loop that runs the replies; never blocks."""

    def __init__(self, open_session: Callable[[str], SessionRecorder], enabled: Callable[[], bool], *,
                 clock: Callable[[], float] = time.monotonic, idle_close_s: float = IDLE_CLOSE_S,
                 voice: Callable[[], Any] = lambda: None) -> None:
        self.open_session, self.enabled, self.clock, self.idle_close_s = open_session, enabled, clock, idle_close_s
        self.voice = voice
        self.sessions: dict[str, _Open] = {}
        # request id → (recorder, turn) of a reply; only the last replies can still be playing
        self.spoken: BoundedDict[str, tuple[SessionRecorder, int]] = BoundedDict(64)
        self._heard: tuple[Any, Callable[[Any], None]] | None = None  # the Voice listened to, and how
        self._lock = threading.Lock()  # `spoken`: the loop adds, the voice's thread takes

    def observe(self, reply: Any) -> None:
        """A reply to `reply.conv` starts: follow it; its user message is recorded with its first
        text (a reply refused or failed before any text records nothing, unless the session is open)."""
        self.close_idle()
        if not self.enabled():  # turned off: whatever was open ends now
            self.close_all()
            return
        self._listen_to_voice()
        user = reply.conv.messages[reply.at - 1] if reply.at >= 1 else None
        if reply.continuing or user is None or user.role != "user":
            user = None
        seen = [0]
        opened: list[tuple[SessionRecorder, int]] = []  # this reply's (recorder, turn), once it has one

        def start() -> tuple[SessionRecorder, int]:
            if not opened:
                rec = self._session(reply.conv)
                rec.turn += 1
                rec.last = self.clock()
                r, turn = rec.recorder, rec.turn
                if user is not None:
                    r.event("user_text", text=user.content, turn=turn)
                    for path in user.images:
                        r.image(path, turn, name=str(path).rsplit("/", 1)[-1])
                opened.append((r, turn))
            return opened[0]

        def follow(rep: Any, what: str) -> None:
            if what == "text":
                delta, seen[0] = rep.text[seen[0]:], len(rep.text)
                if delta:
                    r, turn = start()
                    self._remember(rep, r, turn)
                    r.event("assistant_delta", text=delta, turn=turn)
            elif what in ("done", "failed"):
                rep.listeners.remove(follow)
                if not rep.text and not opened and reply.conv.id not in self.sessions:
                    return  # refused or empty: no recording for it
                r, turn = start()
                rec = self.sessions.get(reply.conv.id)
                self._remember(rep, r, turn)
                if rep.text:
                    r.event("assistant_text", text=rep.text, turn=turn)
                stats = {k: rep.stats[k] for k in STAT_FIELDS if k in rep.stats}
                if "input_tokens" in stats and "cached_tokens" in stats:
                    stats["new_tokens"] = stats["input_tokens"] - stats["cached_tokens"]
                if stats:
                    r.event("turn_metrics", turn=turn, **stats)
                if what == "failed" and rep.error is not None:
                    r.event("note", text=f"The reply failed: {rep.error[1]}")
                if rec is not None:
                    rec.last = self.clock()

        reply.listeners.append(follow)

    # ------------------------------------------------------------------ the spoken replies

    def _remember(self, rep: Any, recorder: SessionRecorder, turn: int) -> None:
        """Which recording a reply's voice goes to, once its request id is known."""
        rid = getattr(rep, "request_id", None)
        if rid:
            with self._lock:
                self.spoken[rid] = (recorder, turn)

    def _listen_to_voice(self) -> None:
        """Listen to the chat's current Voice (a new one comes with new audio settings); the one
        before is let go, so that it and its audio are not kept alive."""
        voice = self.voice()
        if voice is None or not getattr(voice, "available", False):
            return
        if self._heard is not None:
            if self._heard[0] is voice:
                return
            self._heard[0].remove_listener(self._heard[1])
        listener = lambda event, voice=voice: self._voice_event(voice, event)  # noqa: E731
        voice.add_listener(listener)
        self._heard = (voice, listener)

    def _voice_event(self, voice: Any, event: Any) -> None:
        """A reply finished playing (on the voice's thread): its audio, as far as it was heard,
        becomes the AI track at the time it started to sound. Replays are not recorded."""
        if getattr(event.kind, "value", event.kind) != "finished" or event.replay:
            return
        with self._lock:
            found = self.spoken.pop(event.request_id, None) if event.request_id else None
        if found is None:
            return
        recorder, _turn = found
        try:
            audio = voice.audio_of(event.request_id)
            if audio is None or not recorder.recording:
                return
            samples, rate = audio
            if event.stopped:  # cut short: what was heard of it
                samples = samples[: int(voice.heard_s(event.request_id) * rate)]
            if samples.size == 0:
                return
            first = voice.first_audio_at(event.request_id)
            start = recorder.at(first) if first is not None else recorder.now() - samples.size / rate
            if not recorder.meta.get("ai_rate"):
                recorder.update_meta(ai_rate=int(rate))
            recorder.audio("ai", [samples], max(start, 0.0), int(rate))
        except Exception:  # a recording problem must never reach the voice
            log.exception("The spoken reply could not be recorded")

    def _session(self, conv: Any) -> _Open:
        rec = self.sessions.get(conv.id)
        if rec is None or not rec.recorder.recording:
            if rec is not None:  # stopped on a disk error: closed, so that it is no longer live
                rec.recorder.close()
            rec = self.sessions[conv.id] = _Open(self.open_session(conv.title or ""), last=self.clock())
        return rec

    def close_idle(self) -> None:
        now = self.clock()
        for conv_id in [c for c, s in self.sessions.items() if now - s.last >= self.idle_close_s]:
            self.close(conv_id)

    def close(self, conv_id: str) -> None:
        rec = self.sessions.pop(conv_id, None)
        if rec is not None:
            rec.recorder.close()

    def close_all(self) -> list[Any]:
        """Close every open session (the app is closing); the futures say when each is written."""
        futures = [s.recorder.close() for s in self.sessions.values()]
        self.sessions.clear()
        return futures
