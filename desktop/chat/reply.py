"""One reply being written, without Qt: it sends a conversation to the gateway, follows the
request's events, keeps the reply's message in the conversation up to date and saved as it streams
(throttled, written off the caller's thread), and tells its listeners — the chat view, the voice,
the conversation list — what changed. It runs whether or not anyone shows it."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from enum import Enum
from typing import Any, Callable

from desktop.chat.conversations import INTERRUPTED, STREAMING, Conversation, ConversationStore, StoredMessage
from desktop.chat import branches
from desktop.chat.branches import Edit, undo
from desktop.chat.reply_limit import which_length
from desktop.chat.reply_versions import succeed
from desktop.protocol import (
    ChunkEvent, Done, ErrorEvent, PrefillDone, PrefillProgress, Queued, QueueDone, QueueUpdate,
)
from desktop.errors import OmnideskError
from desktop.model.params import SamplingParams
from desktop.model.tool_render import tools_json
from desktop.protocol.engine import EngineApi

log = logging.getLogger(__name__)

SAVE_EVERY_S = 1.0  # a streaming reply is written at its first words, then at most this often
LOADING_POLL_S = 0.25  # how often a reply sent while the model loads checks whether it is up
CONTINUE_PROMPT = ("Continue your previous reply from exactly where it stopped. Do not repeat "
                   "anything you already wrote and do not mention the interruption.")
_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="omnidesk-save")  # in order, off the Qt thread


class Phase(str, Enum):
    SENT = "sent"  # given to the gateway, nothing heard yet
    LOADING = "loading"  # the model is still loading: it is sent once the model is up
    QUEUED = "queued"  # waiting for a worker (`position`, `eta_s`)
    READING = "reading"  # the worker reads the prompt (`progress`, for a long one)
    WRITING = "writing"  # the prompt is read; text streams
    DONE = "done"  # ended: with text (finished or stopped), or with none
    FAILED = "failed"  # ended with an error (`error`)


def request_messages(conv: Conversation, tools: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """What the gateway gets: the system prompt, then every message (images as content parts; a
    tool message with the call it answers; a reply that made calls as the text the model generated,
    so its KV is reused), and the tools offered (OpenAI's form) on the first message."""
    out: list[dict[str, Any]] = [{"role": "system", "content": conv.system_prompt}] if conv.system_prompt else []
    for m in conv.messages:
        if m.images:
            parts = [{"type": "image", "path": p} for p in m.images] + [{"type": "text", "text": m.content}]
            out.append({"role": m.role, "content": parts})
        elif m.role == "tool":
            call = m.call or {}
            out.append({"role": "tool", "content": m.content, "tool_call_id": call.get("id") or "call_saved",
                        "name": call.get("name", "")})
        else:
            out.append({"role": m.role, "content": m.content})
    if tools and out:
        out[0]["tools"] = tools_json(tools)
    return out


def joined(head: str, tail: str) -> str:
    """A continuation after the text it continues: a space between two words, none where either
    side already has one or where the tail starts with punctuation."""
    if not head or not tail or head[-1].isspace() or tail[0].isspace() or tail[0] in ",.;:!?)]}'\"":
        return head + tail
    return head + " " + tail


def prefill_left(first: PrefillProgress | None, last: PrefillProgress | None) -> float | None:
    """Seconds the rest of a prefill should take, from two progress reports of it (None before).
    The time per token grows with its position (attention reads everything before it: a 6,000-
    token prompt's last chunk took 6× its first on a CPU), so fit time/token = a + b·position
    through the average pace so far and the pace since `first`, and sum it over what is left."""
    if first is None or last is None or last.done <= first.done or first.done <= first.cached:
        return None
    seconds = last.elapsed_ms / 1000.0
    r1, m1 = seconds / (last.done - last.cached), (last.cached + last.done) / 2
    r2, m2 = (seconds - first.elapsed_ms / 1000.0) / (last.done - first.done), (first.done + last.done) / 2
    b = max((r2 - r1) / (m2 - m1), 0.0)
    a = max(r1 - b * m1, 0.0)
    return a * (last.total - last.done) + b * (last.total ** 2 - last.done ** 2) / 2


Listener = Callable[["Reply", str], None]


class Reply:
    """A reply to `conv`, written into `message`, which is `conv.messages[index]`: a new message
    appended at once (status STREAMING), or when `continuing` the interrupted reply at the end,
    which grows. `previous`: the reply a Regenerate took away; it comes back if no new text
    arrives, else it stays one of the new reply's versions (reply_versions.py). `edit`: the edit
    (branches.py) that made the message answered; when the reply fails without a word, the edit is
    taken back (`undone`) and the branch shown before comes back. `again`: write the last reply
    again (Regenerate): it is taken out here and becomes `previous`. `typed`: the user's message
    was prefilled while it was typed (draft_warm.py); the stats then say how many of its tokens
    the cache held already (`typed_tokens`). A Reply is the only writer of
    its conversation's messages during its turn: the user's message that starts it (`ask`, or
    `ask_edited` for an edit), its own message, and the refused message given back after it (`take_back`). Listeners get
    (reply, what), `what` one of: loading, queued, reading, progress, writing, text, done, failed.
    After its end the message's status is "" (whole, also when stopped) or INTERRUPTED (ended
    early by an error or by `stop(interrupted=True)`)."""

    def __init__(self, gateway: EngineApi, store: ConversationStore, conv: Conversation, params: SamplingParams, *,
                 previous: StoredMessage | None = None, continuing: bool = False, edit: Edit | None = None,
                 again: bool = False, typed: bool = False, overflow: str = "slide",
                 tools: list[dict[str, Any]] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if again:
            if previous is not None or continuing or not conv.messages or conv.messages[-1].role != "assistant":
                raise ValueError("Only the reply at the end of a conversation can be written again.")
            previous = conv.messages.pop()
        self.gateway, self.store, self.conv, self.params = gateway, store, conv, params
        self.previous, self.continuing, self.edit, self.clock = previous, continuing, edit, clock
        self.typed, self.overflow = typed, overflow
        self.view: PrefillDone | None = None  # where the model's view of the conversation starts (a slide)
        self.undone: StoredMessage | None = None  # the edited message, when the edit was taken back
        self.tools = list(tools or [])  # offered to the model (OpenAI's form): its reply may call them
        self._request = request_messages(conv, self.tools)
        if continuing:
            if not conv.messages or conv.messages[-1].role != "assistant":
                raise ValueError("Only a reply at the end of a conversation can be continued.")
            self._request.append({"role": "user", "content": CONTINUE_PROMPT})
            self.message = conv.messages[-1]
        else:
            self.message = StoredMessage("assistant", "")
            if previous is not None:  # saved with it from its first words: a crash loses no version
                succeed(self.message, previous)
            conv.messages.append(self.message)
        self.base = self.message.content  # what a continuation continues
        self.at = len(conv.messages) - 1  # where the reply's message is while it is written
        self.message.status = STREAMING
        self.phase = Phase.SENT
        self.request_id: str | None = None
        self.text = ""  # what this request wrote (the continuation alone when continuing)
        self.delta = ""  # the text the latest "text" notice added (the stream's own delta)
        self.position, self.eta_s = 0, 0.0
        self.progress: PrefillProgress | None = None  # the last report of a long prefill
        self._first_progress: PrefillProgress | None = None
        self.stats: dict[str, Any] = {}
        self.error: tuple[str, str, bool] | None = None  # code, message, retryable
        self.save_error: str | None = None
        self.listeners: list[Listener] = []
        self._stop_asked = self._interrupt = self._abandoned = False
        self._last_save: float | None = None
        self._pending: tuple[Conversation, int] | None = None  # a snapshot and its version
        self._flusher: asyncio.Task | None = None

    @staticmethod
    def ask(store: ConversationStore, conv: Conversation, message: StoredMessage) -> None:
        """A turn starts with the user's message: added to `conv` and saved before the model sees
        it (the Reply that answers it is made next). OSError when it could not be saved."""
        conv.messages.append(message)
        store.save(conv)

    @staticmethod
    def ask_edited(store: ConversationStore, conv: Conversation, index: int, text: str, images: list[str]) -> Edit:
        """A turn that starts with an edit of the user's message `index`: a new branch of `conv`
        there (branches.py), saved before the model sees it. ValueError when that message is gone;
        OSError when it could not be saved (the edit is undone then: `conv` is as it was)."""
        edit = branches.edit(conv, index, text, images)
        try:
            store.save(conv)
        except OSError:
            undo(conv, edit)
            raise
        return edit

    @staticmethod
    def answer_tools(store: ConversationStore, conv: Conversation, results: list[StoredMessage]) -> None:
        """A tool round's results (tool messages, in the order of the calls) after the reply that
        made the calls, saved before the model reads them. OSError when they could not be saved."""
        conv.messages.extend(results)
        conv.updated = max(time.time(), conv.updated)
        store.save(conv)

    def take_back(self) -> StoredMessage | None:
        """After the reply ended refused: take the unanswered user message out of the conversation
        and return it (None when the conversation no longer ends with one: changed meanwhile)."""
        conv = self.conv
        if not self.ended or not conv.messages or conv.messages[-1].role != "user":
            return None
        return conv.messages.pop()

    @property
    def index(self) -> int:
        """Where the reply's message is in the conversation (-1 once it was taken out)."""
        return next((i for i, m in enumerate(self.conv.messages) if m is self.message), -1)

    @property
    def seconds_left(self) -> float | None:
        """How long the rest of a long prompt should take to read (None until known)."""
        return prefill_left(self._first_progress, self.progress)

    @property
    def ended(self) -> bool:
        return self.phase in (Phase.DONE, Phase.FAILED)

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Send the request and follow it to its end, then wait until the conversation is saved."""
        try:
            try:
                stream = await self._open()
            except OmnideskError as exc:  # refused at the door: queue full, invalid request, shut down
                self._end(None, ErrorEvent("", exc.code, exc.message, exc.retryable))
                return
            if stream is None:  # stopped while the model was still loading
                self._end(Done(""), None)
                return
            self.request_id = stream.request_id
            if self._stop_asked:
                await self._cancel()
            async for event in stream:
                self._on_event(event)
        except asyncio.CancelledError:  # the app is going away: leave no request running
            if not self.ended:
                if self.request_id is not None:
                    await asyncio.shield(self._cancel())
                self._interrupt = True
                self._settle(None)
                self._checkpoint(force=True)  # written by the flush below, after any write under way
            raise
        except Exception:  # a bug, not a model error: the reply must still end
            if not self.ended:
                self._end(None, ErrorEvent(self.request_id or "", "internal", "", True))
            raise
        finally:
            if self._flusher is not None:
                await asyncio.shield(self._flusher)

    async def saved(self) -> None:
        """Wait until what the reply wrote is on disk (its last write, if one is under way)."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)

    async def _open(self) -> Any:
        """The request's event stream; while the model is still loading ("not_ready"), wait for it.
        The conversation's images are read from its store and decoded first, on a thread."""
        request = self._request
        if any(isinstance(m.get("content"), list) for m in request):
            request = await self.store.images.resolve_soon(request)
        while True:
            try:
                return self.gateway.chat(request, self.params, conversation=self.conv.id, overflow=self.overflow)
            except OmnideskError as exc:
                if exc.code != "not_ready":
                    raise
            if self._stop_asked:
                return None
            self._set(Phase.LOADING, "loading")
            await asyncio.sleep(LOADING_POLL_S)

    def _on_event(self, event: Any) -> None:
        if isinstance(event, (Queued, QueueUpdate)):
            self.position, self.eta_s = event.position, event.eta_s
            self._set(Phase.QUEUED, "queued", force=True)
        elif isinstance(event, QueueDone):
            self._set(Phase.READING, "reading")
        elif isinstance(event, PrefillProgress):
            self._first_progress = self._first_progress or event
            self.progress = event
            self._set(Phase.READING, "progress", force=True)
        elif isinstance(event, PrefillDone):
            self.view = event
            self._set(Phase.WRITING, "writing")
        elif isinstance(event, ChunkEvent):
            self.delta = event.text_delta
            self.text += event.text_delta
            self.message.content = joined(self.base, self.text)
            self._checkpoint()
            self._set(Phase.WRITING, "text", force=True)
        elif isinstance(event, Done):
            self._end(event, None)
        elif isinstance(event, ErrorEvent):
            self._end(None, event)

    def _set(self, phase: Phase, what: str, *, force: bool = False) -> None:
        if phase is not self.phase or force:
            self.phase = phase
            self._tell(what)

    def _tell(self, what: str) -> None:
        for listener in list(self.listeners):
            try:
                listener(self, what)
            except Exception:  # a listener's bug is reported; the reply and its saving go on
                sys.excepthook(*sys.exc_info())

    # ------------------------------------------------------------------ stopping

    async def stop(self, *, interrupted: bool = False) -> None:
        """Stop the reply (or leave the queue); it ends with what was written, marked INTERRUPTED
        when `interrupted` (the app closing: it can be continued later)."""
        self._stop_asked = True
        self._interrupt = self._interrupt or interrupted
        if self.request_id is not None and not self.ended:
            await self._cancel()

    async def abandon(self) -> None:
        """Its conversation is being deleted: stop, write nothing more, wait for a write under way."""
        self._abandoned, self._pending = True, None
        await self.stop()
        if self._flusher is not None:
            await asyncio.shield(self._flusher)

    async def _cancel(self) -> None:
        try:
            await self.gateway.cancel(self.request_id)
        except OmnideskError:  # it ended meanwhile, or the engine is gone: nothing runs any more
            pass

    # ------------------------------------------------------------------ the end

    def _end(self, done: Done | None, error: ErrorEvent | None) -> None:
        if done is not None:
            stats = {**asdict(done.stats), "request_id": self.request_id} if self.request_id else {}
            self.stats = which_length(stats, self.params.max_tokens)
            if self.typed and stats:  # only a warm puts the new message's tokens in the cache
                self.stats["typed_tokens"] = max(done.stats.cached_tokens - done.stats.history_tokens, 0)
            if stats and self.view is not None and self.view.window_start:  # the oldest messages left the view
                first_seen = self.view.window_start - (1 if self.conv.system_prompt else 0)  # in conv.messages
                self.stats.update(window_start=self.view.window_start, first_seen=first_seen, slid=self.view.slid)
            self.text = done.text or self.text
        else:
            self.error = (error.code, error.message, error.retryable)
        self._settle(done)
        self._checkpoint(force=True)
        self.phase = Phase.FAILED if error is not None else Phase.DONE
        self._tell("failed" if error is not None else "done")

    def _settle(self, done: Done | None) -> None:
        """Put the conversation right: a reply with text keeps it; one without is taken out (or,
        continuing, stays as it was); a failed Regenerate brings the previous reply back, a failed
        edit the branch shown before it."""
        msg, conv = self.message, self.conv
        if done is not None and self.text:
            msg.content, msg.stats = joined(self.base, self.text), dict(self.stats)
            msg.status = INTERRUPTED if self._interrupt else ""
            conv.updated = max(time.time(), conv.updated)
            return
        keep_partial = done is None and self.text and self.previous is None
        if keep_partial or self.continuing:
            msg.content, msg.status = joined(self.base, self.text), INTERRUPTED
            return
        i = self.index
        if i >= 0:
            del conv.messages[i]
            if self.previous is not None:
                conv.messages.insert(i, self.previous)
        if self.error is not None and self.edit is not None:  # not when the app closes: it is kept
            self.undone = undo(conv, self.edit)

    # ------------------------------------------------------------------ saving

    def _checkpoint(self, force: bool = False) -> None:
        """Save the conversation as it is now: at the first words, then at most every SAVE_EVERY_S
        (the snapshot is taken here; JSON and the atomic write run on the writer thread, in order)."""
        if self._abandoned or self.conv.id not in self.store:
            return
        now = self.clock()
        if not force and self._last_save is not None and now - self._last_save < SAVE_EVERY_S:
            return
        self._last_save = now
        self._pending = (self._snapshot(), self.store.stamp(self.conv.id))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())

    def _snapshot(self) -> Conversation:
        """A copy nobody changes: only the reply's message changes while it streams."""
        return dataclasses.replace(self.conv, messages=[dataclasses.replace(m) if m is self.message else m
                                                        for m in self.conv.messages])

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending is not None:
            (snapshot, stamp), self._pending = self._pending, None
            try:
                await loop.run_in_executor(_writer, self.store.write_snapshot, snapshot, stamp)
            except OSError as exc:
                self.save_error = exc.strerror or str(exc)
                log.warning("Could not save conversation %s: %s", snapshot.id, exc)
