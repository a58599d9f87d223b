"""The user's words prefilled into the call's session while they still speak: each new partial
transcript goes in as a draft (the worker keeps the KV that agrees with the last draft and
prefills the rest), so at the end of the turn only the final words' difference and the reply's
header are left to prefill. At most one draft is in flight; the newest partial waiting wins."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from desktop.call.session import CallSession
from desktop.call.tasks import CallTasks
from desktop.errors import OmnideskError
from desktop.protocol import ErrorEvent, PrefillDone

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DraftTurn:
    """One utterance's drafts: `closed` once its final words went (or it was dropped);
    `first_cached`: the session's KV when its first draft came (its PrefillDone's cached
    tokens), to count what the drafts prefilled ahead of the reply."""

    closed: bool = False
    first_cached: int | None = None

    def kept(self, cached_tokens: int) -> int:
        """Of the reply's cached tokens, those the drafts prefilled before the turn ended."""
        return 0 if self.first_cached is None else max(cached_tokens - self.first_cached, 0)


class Draft:
    """`begin` a turn, `partial(text)` as the transcriber hears more (any thread), then either
    `finish` (the reply brings the final words: the session replaces the draft with them) or
    `withdraw` (the turn is dropped: so is its draft). Sends go through the session's `lane`, so
    that no draft slips in between a cut reply and its trim, nor after the turn's final words."""

    def __init__(self, session: CallSession, tasks: CallTasks) -> None:
        self.session, self.tasks = session, tasks
        self._lock = threading.Lock()
        self._turn = DraftTurn(closed=True)
        self._waiting: str | None = None  # the newest words not sent yet ("": a withdrawal)
        self._sending = False  # a send task runs (at most one)
        self._drafted = False  # the session may hold a draft of ours
        self._running: str | None = None  # the request id of the draft sent and not ended

    def begin(self) -> None:
        """An utterance starts: its partials will be drafted."""
        with self._lock:
            self._turn, self._waiting = DraftTurn(), None

    def partial(self, text: str) -> None:
        """A partial transcript (on the transcriber's thread): the newest goes in next."""
        text = text.strip()
        with self._lock:
            if self._turn.closed or not text:
                return
            self._waiting = text
            self._kick()

    def withdraw(self) -> None:
        """The turn is dropped (cancelled, or no words in the end): its draft goes too."""
        with self._lock:
            self._turn.closed = True
            self._waiting = "" if self._drafted or self._sending else None
            if self._waiting is not None:
                self._kick()

    async def finish(self) -> DraftTurn:
        """The turn's final words are on their way (with the reply): no more drafts of it, and a
        draft still queued or prefilling is cancelled (its KV so far is kept), so that they do
        not wait for it."""
        with self._lock:
            turn, self._turn.closed = self._turn, True
            if self._waiting:
                self._waiting = None  # the final words replace it
            self._drafted = False  # the reply's command replaces whatever the session holds
            running = self._running
        if running is not None:
            await self.session.cancel(running)
        return turn

    # ------------------------------------------------------------------ on the loop

    def _kick(self) -> None:
        """Under the lock: start the sender unless one runs (it takes the newest words). Nothing
        before the call started (its loop is not known yet)."""
        if not self._sending and self.tasks.loop is not None:
            self._sending = True
            self.tasks.spawn(self._send_all())

    async def _send_all(self) -> None:
        try:
            while (item := self._next()) is not None:
                try:
                    await self._send(*item)
                except OmnideskError as exc:  # a draft is only a head start: the final words still go
                    log.info("A draft of the user's words was not prefilled: %s", exc.message)
                except Exception:
                    log.exception("A draft of the user's words failed")
        except BaseException:  # cancelled (the call is closing): a later partial starts a new sender
            with self._lock:
                self._sending = False
            raise

    def _next(self) -> tuple[str, DraftTurn] | None:
        """The newest words to send and their turn; None (the sender stops) when there are none,
        decided under the lock that `partial` takes, so no words are left behind unsent."""
        with self._lock:
            text, self._waiting = self._waiting, None
            if text is None:
                self._sending = False
                return None
            return text, self._turn

    async def _send(self, text: str, turn: DraftTurn) -> None:
        async with self.session.lane:
            with self._lock:
                if text and (turn is not self._turn or turn.closed):
                    return  # its turn ended meanwhile: the final words went (or go) in its place
                self._drafted = bool(text)
            stream = self.session.append([{"role": "user", "content": text}] if text else [], draft=True)
            self._running = stream.request_id
        try:
            async for event in stream:
                if isinstance(event, PrefillDone) and text and turn.first_cached is None:
                    turn.first_cached = event.cached_tokens
                elif isinstance(event, ErrorEvent):
                    raise OmnideskError(event.message, code=event.code)
        finally:
            self._running = None
