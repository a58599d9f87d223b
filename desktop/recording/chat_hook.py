"""Records chat conversations when the chat setting is on: `observe(reply)` is handed each Reply
as it starts (a hook of the chat page); one session per conversation, opened at its first
recorded reply and closed when it has been idle a while or the app closes. Lines: the user's
text and images, the streamed deltas, the final text and the reply's token figures."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from desktop.recording.writer import SessionRecorder

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
    setting can change at any time). Runs on the loop that runs the replies; never blocks."""

    def __init__(self, open_session: Callable[[str], SessionRecorder], enabled: Callable[[], bool], *,
                 clock: Callable[[], float] = time.monotonic, idle_close_s: float = IDLE_CLOSE_S) -> None:
        self.open_session, self.enabled, self.clock, self.idle_close_s = open_session, enabled, clock, idle_close_s
        self.sessions: dict[str, _Open] = {}

    def observe(self, reply: Any) -> None:
        """A reply to `reply.conv` starts: record its user message and follow the reply."""
        self.close_idle()
        if not self.enabled():  # turned off: whatever was open ends now
            self.close_all()
            return
        rec = self._session(reply.conv)
        rec.turn += 1
        rec.last = self.clock()
        turn, r = rec.turn, rec.recorder
        user = reply.conv.messages[reply.at - 1] if reply.at >= 1 else None
        if not reply.continuing and user is not None and user.role == "user":
            r.event("user_text", text=user.content, turn=turn)
            for path in user.images:
                r.image(path, turn, name=str(path).rsplit("/", 1)[-1])
        seen = [0]

        def follow(rep: Any, what: str) -> None:
            if what == "text":
                delta, seen[0] = rep.text[seen[0]:], len(rep.text)
                if delta:
                    r.event("assistant_delta", text=delta, turn=turn)
            elif what in ("done", "failed"):
                rep.listeners.remove(follow)
                if rep.text:
                    r.event("assistant_text", text=rep.text, turn=turn)
                stats = {k: rep.stats[k] for k in STAT_FIELDS if k in rep.stats}
                if "input_tokens" in stats and "cached_tokens" in stats:
                    stats["new_tokens"] = stats["input_tokens"] - stats["cached_tokens"]
                if stats:
                    r.event("turn_metrics", turn=turn, **stats)
                if what == "failed" and rep.error is not None:
                    r.event("note", text=f"The reply failed: {rep.error[1]}")
                rec.last = self.clock()

        reply.listeners.append(follow)

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
