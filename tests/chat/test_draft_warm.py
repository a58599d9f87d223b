"""The draft warmer (chat/draft_warm.py) without Qt: a warm asks exactly what Send will ask, the
same draft is not sent twice, an unanswered turn is not warmed, and Send learns whether a warm
reached a slot (a skipped one does not count)."""

from __future__ import annotations

import asyncio

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.chat.draft_warm import DraftWarmer
from desktop.chat.reply import Reply, request_messages
from desktop.errors import OmnideskError
from desktop.protocol import Done, TokenStats
from desktop.tasks import TaskSet


class Stream:
    def __init__(self, done: Done) -> None:
        self.request_id, self._events = done.request_id, [done]

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self._events:
            raise StopAsyncIteration
        return self._events.pop(0)


class Engine:
    """Answers each warm with a Done naming `slot` (-1: skipped), or refuses with `refuse`."""

    def __init__(self) -> None:
        self.asked: list[tuple[list, int]] = []
        self.slot, self.refuse = 0, None

    def chat(self, messages, params, **kw):
        if self.refuse:
            raise self.refuse
        self.asked.append((messages, params.max_tokens))
        return Stream(Done(f"w{len(self.asked)}", stats=TokenStats(slot=self.slot, finish_reason="prefilled")))


def test_a_warm_asks_what_send_will_ask_and_send_learns_it_was_placed(tmp_path):
    async def main() -> None:
        store, engine, tasks = ConversationStore(tmp_path), Engine(), TaskSet()
        warmer = DraftWarmer(engine, tasks)
        conv = store.new("Be brief.", "assistant")
        Reply.ask(store, conv, StoredMessage("user", "Hi"))
        conv.messages.append(StoredMessage("assistant", "Hello!"))
        assert warmer.warm(conv, "  What about ") and not warmer.warm(conv, "What about")  # the same draft
        await tasks.wait()
        asked, max_tokens = engine.asked[0]
        Reply.ask(store, conv, StoredMessage("user", "What about"))  # what Send does with that text
        assert max_tokens == 0 and asked == request_messages(conv)
        assert warmer.sent(conv) and not warmer.sent(conv)  # forgotten once sent
    asyncio.run(main())


def test_no_warm_counts_when_skipped_refused_or_after_an_unanswered_turn(tmp_path):
    async def main() -> None:
        store, engine, tasks = ConversationStore(tmp_path), Engine(), TaskSet()
        warmer = DraftWarmer(engine, tasks)
        conv = store.new("", "assistant")
        engine.slot = -1  # the engine skipped it (it would have evicted)
        assert warmer.warm(conv, "Hello")
        await tasks.wait()
        assert not warmer.sent(conv)
        engine.refuse = OmnideskError("The model is not running yet.", code="not_ready")
        assert not warmer.warm(conv, "Hello there") and not warmer.sent(conv)
        engine.refuse = None
        conv.messages.append(StoredMessage("user", "Unanswered"))
        assert not warmer.warm(conv, "Again") and not warmer.warm(conv, "   ")
    asyncio.run(main())
