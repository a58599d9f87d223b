"""Chat recording through the chat page's reply hook: one session per conversation, the user's text
and images, the streamed deltas, the final text and token figures; off → nothing is recorded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from desktop.engine.conversations import Conversation, StoredMessage
from desktop.recording.chat_hook import ChatRecording
from desktop.recording.replay import read_timeline
from desktop.recording.writer import SessionRecorder


@dataclass
class FakeReply:
    """What ChatRecording reads of an engine Reply: conv, at, continuing, text, stats, error, listeners."""

    conv: Conversation
    continuing: bool = False
    text: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    error: tuple[str, str, bool] | None = None
    listeners: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.conv.messages.append(StoredMessage("assistant", ""))
        self.at = len(self.conv.messages) - 1

    def stream(self, *parts: str, stats: dict[str, Any] | None = None, failed: str | None = None) -> None:
        for part in parts:
            self.text += part
            for listener in list(self.listeners):
                listener(self, "text")
        self.stats = stats or {}
        self.error = ("boom", failed, False) if failed else None
        for listener in list(self.listeners):
            listener(self, "failed" if failed else "done")


def test_chat_turns_are_recorded_per_conversation(tmp_path):
    opened: list[SessionRecorder] = []
    on = [True]
    now = [0.0]

    def open_session(title: str) -> SessionRecorder:
        opened.append(SessionRecorder(tmp_path, "chat", title=title))
        return opened[-1]

    chats = ChatRecording(open_session, lambda: on[0], clock=lambda: now[0], idle_close_s=600)
    img = tmp_path / "cat.png"
    img.write_bytes(b"\x89PNG fake")
    conv = Conversation("c1", title="Cats", messages=[StoredMessage("user", "Look at my cat", images=[str(img)])])
    reply = FakeReply(conv)
    chats.observe(reply)
    reply.stream("A ", "fine ", "cat.", stats={"ttft_ms": 12.0, "input_tokens": 30, "cached_tokens": 20,
                                               "generated_tokens": 3, "kind": "hit"})
    assert reply.listeners == []  # it let go at the end
    conv.messages.append(StoredMessage("user", "And a dog?"))
    second = FakeReply(conv)
    chats.observe(second)
    second.stream("Wo", failed="The worker stopped.")
    other = Conversation("c2", messages=[StoredMessage("user", "hi")])
    on[0] = False
    chats.observe(FakeReply(other))  # off: not recorded, and c1's session ends
    assert len(opened) == 1 and chats.sessions == {} and not opened[0].recording
    on[0] = True
    chats.observe(FakeReply(other))
    third = FakeReply(conv)
    chats.observe(third)  # c1 again: a new session
    assert len(opened) == 3 and set(chats.sessions) == {"c1", "c2"}
    now[0] = 601.0
    chats.close_idle()  # idle for 10 minutes: closed
    assert chats.sessions == {}
    for fut in chats.close_all():
        fut.result(10)
    for session in opened:  # the ones closed along the way too (close() again: the same future)
        session.close().result(10)

    rec = opened[0]
    events = read_timeline(rec.folder)
    assert rec.meta["title"] == "Cats" and rec.meta["type"] == "chat" and rec.meta["first_words"] == "Look at my cat"
    assert [(e["turn"], e["text"]) for e in events if e["kind"] == "user_text"] == [(1, "Look at my cat"), (2, "And a dog?")]
    assert [e["text"] for e in events if e["kind"] == "assistant_delta" and e["turn"] == 1] == ["A ", "fine ", "cat."]
    assert [(e["turn"], e["text"]) for e in events if e["kind"] == "assistant_text"] == [(1, "A fine cat."), (2, "Wo")]
    metrics = next(e for e in events if e["kind"] == "turn_metrics")
    assert (metrics["turn"], metrics["cached_tokens"], metrics["new_tokens"], metrics["ttft_ms"]) == (1, 20, 10, 12.0)
    assert any(e["kind"] == "note" and "worker stopped" in e["text"] for e in events)
    image = next(e for e in events if e["kind"] == "image")
    assert image["turn"] == 1 and (rec.folder / image["file"]).read_bytes() == b"\x89PNG fake"
    assert events[-1]["kind"] == "end" and rec.meta["ended_at"] is not None
