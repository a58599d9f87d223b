"""Speaking replies while they stream, without Qt: the gateway's own text deltas go to the voice
as they arrive (`speak_begin` at the first, `speak_delta` for each, `speak_end` at the end, `stop`
when the reply is dropped). Nothing accumulates the text to split it again. One reply speaks at
a time; one that ended or was silenced never starts again. The chat feeds it from its replies'
listeners (`follow`), a call from its session stream (`delta`/`end`)."""

from __future__ import annotations

import threading
from typing import Any, Callable

from desktop.model.tool_calls import parse, prose_so_far
from desktop.speech.finished import Over


class ReplyVoice:
    """`voice`: a Voice (speak_begin/speak_delta/speak_end/stop, and `finished`, its registry of
    replies that are over, where this marks the replies it ended or dropped). `enabled()`: whether
    replies are spoken now (the chat's toggle); a reply is only started while it is.
    `on_begin(rid)`: told when a reply starts to speak (the chat marks its bubble). Thread-safe
    (a call stops its reply from the microphone's thread while the loop feeds it)."""

    def __init__(self, voice: Any, enabled: Callable[[], bool] = lambda: True,
                 on_begin: Callable[[str], None] | None = None) -> None:  # fmt: skip
        self.voice, self.enabled, self.on_begin = voice, enabled, on_begin
        self.current: str | None = None  # the reply being spoken
        self._spoken = ""  # the text given to the voice for it
        self._followed: list[Any] = []  # Replies followed and not ended
        self._lock = threading.RLock()

    def begin(self, rid: str) -> bool:
        """Start speaking reply `rid` now, before its first words (a call: the voice then reports
        its end even if no words come). False if it may not start (ended, or voice off)."""
        with self._lock:
            if rid in self.voice.finished or not self.enabled():  # it never speaks again
                return False
            if rid == self.current:
                return True
            if self.current is not None:  # a newer reply takes over
                self.drop(self.current)
            self.current, self._spoken = rid, ""
            self.voice.speak_begin(rid)
            if self.on_begin is not None:
                self.on_begin(rid)
            return True

    def delta(self, rid: str | None, text: str, so_far: str | None = None) -> None:
        """More text of reply `rid`. A reply that starts here (the voice was turned on while it
        streamed) speaks `so_far`, all of its text until now, instead of this delta alone."""
        with self._lock:
            if rid is None or not text:
                return
            if rid != self.current:
                if not self.begin(rid):
                    return
                text = so_far if so_far else text
            self.voice.speak_delta(rid, text)
            self._spoken += text

    def end(self, rid: str | None, text: str | None = None) -> None:
        """The reply is whole; `text`, its final text, adds what the stream did not carry."""
        with self._lock:
            if rid is None or rid != self.current:
                return
            if text and len(text) > len(self._spoken) and text.startswith(self._spoken):
                self.voice.speak_delta(rid, text[len(self._spoken) :])
            self.voice.speak_end(rid)
            self._finish(rid, Over.ENDED)

    def drop(self, rid: str | None) -> None:
        """The reply is gone (failed, taken out, stopped, talked over): silence it, for good —
        also when its text was all given and its audio still plays."""
        with self._lock:
            if rid is None:
                return
            self._finish(rid, Over.SILENCED)
            self.voice.stop(rid)

    def silence(self) -> None:
        """Stop everything now: the reply being spoken, and the replies followed so far, do
        not start again (a reply still waiting for its first words stays quiet too)."""
        with self._lock:
            if self.current is not None:
                self._finish(self.current, Over.SILENCED)
            for reply in self._followed:
                reply.listeners.remove(self._on_reply)
            self._followed.clear()
            self.voice.stop()

    def follow(self, reply: Any) -> None:
        """Speak a chat.reply.Reply as it streams (its listeners give text, done, failed)."""
        reply.listeners.append(self._on_reply)
        self._followed.append(reply)

    def _on_reply(self, reply: Any, what: str) -> None:
        if what in ("done", "failed") and reply in self._followed:
            self._followed.remove(reply)
        if what == "text":
            names = _offered(reply)
            if names is None:
                self.delta(reply.request_id, reply.delta, reply.text)
            else:  # a reply that may call tools: only its prose is spoken, never a call's JSON
                said = prose_so_far(reply.text)
                with self._lock:
                    before = self._spoken if reply.request_id == self.current else ""
                if len(said) > len(before) and said.startswith(before):
                    self.delta(reply.request_id, said[len(before) :], said)
        elif what == "done" and reply.text:
            names = _offered(reply)
            parsed = parse(reply.text, names) if names is not None else None
            text = parsed.content if parsed is not None else reply.text
            if text:
                if names is not None and reply.request_id != self.current:  # all of it was held back
                    self.delta(reply.request_id, text, text)
                self.end(reply.request_id, text)
            else:
                self.drop(reply.request_id)
        elif what in ("done", "failed"):
            self.drop(reply.request_id)

    def _finish(self, rid: str, how: Over) -> None:
        self.voice.finished.mark(rid, how)
        if rid == self.current:
            self.current, self._spoken = None, ""


def _offered(reply: Any) -> list[str] | None:
    """The names of the tools `reply` offered the model; None when it offered none."""
    tools = getattr(reply, "tools", None)
    return [t["function"]["name"] for t in tools] if tools else None
