"""Chat recording through the chat page's reply hook: one session per conversation, the user's text
and images, the streamed deltas, the final text and token figures; off → nothing is recorded."""

from __future__ import annotations

import time

from helpers import FakeReply, FullDisk
from desktop.chat.conversations import Conversation, StoredMessage
from desktop.recording.chat_hook import ChatRecording
from desktop.recording.replay import read_timeline
from desktop.recording.writer import SessionRecorder, live_folders


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
    hello = FakeReply(other)
    chats.observe(hello)
    hello.stream("hello")  # a session opens with a reply's first text
    third = FakeReply(conv)
    chats.observe(third)  # c1 again: a new session
    third.stream("Woof")
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


def test_a_session_stopped_by_the_disk_is_closed_when_replaced(tmp_path):
    """A session the disk stopped is closed when the next reply opens a new one: it is no longer
    counted as live (the Recordings list would show it as still recording)."""
    opened: list[SessionRecorder] = []

    def open_session(title: str) -> SessionRecorder:
        opened.append(SessionRecorder(tmp_path, "chat", title=title, disk=FullDisk(room=1) if not opened else None))
        return opened[-1]

    chats = ChatRecording(open_session, lambda: True)
    conv = Conversation("c1", messages=[StoredMessage("user", "hi")])
    reply = FakeReply(conv)
    chats.observe(reply)
    reply.stream("hello")  # its first line finds the disk full
    first = opened[0]
    for _ in range(200):
        if first.failed is not None:
            break
        time.sleep(0.01)
    assert first.failed and first.folder in live_folders()
    conv.messages.append(StoredMessage("user", "again"))
    again = FakeReply(conv)
    chats.observe(again)
    again.stream("hello again")
    assert first._closing is not None  # closed by the hook, not by this test
    first._closing.result(10)
    assert len(opened) == 2 and first.folder not in live_folders() and opened[1].folder in live_folders()
    for fut in chats.close_all():
        fut.result(10)
    assert opened[1].folder not in live_folders()
