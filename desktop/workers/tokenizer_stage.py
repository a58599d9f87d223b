"""The worker's tokenizer stage: a Chat's messages are templated and tokenised on a thread of
their own before the command reaches the scheduling loop, so running decodes never wait for it.

The stage hands what it made forward with the command (Prepared: the messages read and their
canonical ids); the loop uses it instead of reading and tokenising again. Correctness never
depends on it: whatever the stage did not prepare (a session's input, a command sent on early by
a Stop, one the stage could not read), the loop computes itself, with the same functions."""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable

from desktop.errors import InvalidRequest
from desktop.protocol import Chat, Command, CreateSession, Reset, Shutdown, Stop
from desktop.model.chat_template import ChatTemplate, Encoded
from desktop.model.messages import MAX_CHARS, Message, parse_messages
from desktop.model.params import as_params
from desktop.workers.slide import view_start

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Prepared:
    """What the stage made of one request: its messages, read and checked as the loop reads them
    (parse_messages, the same limit), and their canonical ids (ChatTemplate.encode). A chat past
    the window that slides: the messages the model still sees and `start`, the index of the first
    after the system prompt in the request's messages (0: it sees them all; see fit_view)."""

    msgs: tuple[Message, ...]
    encoded: Encoded
    start: int = 0


def chat_chars(cmd: Chat) -> int | None:
    """The total characters a chat may carry: a conversation that slides may be longer than the
    window as a whole (each message still within `max_chars`)."""
    return MAX_CHARS if cmd.overflow == "slide" and not cmd.raw else None


def fit_view(template: ChatTemplate, msgs: tuple[Message, ...], encoded: Encoded | None, window: int,
             max_tokens: int) -> Prepared:
    """The view of a sliding chat (workers/slide.py over each message's tokens): the system prompt
    and the messages from the first one the model still sees. The reserve is the reply prompt and
    the reply, at most a quarter of the window (a longer reply is cut where the window ends)."""
    encoded = encoded if encoded is not None else template.encode(msgs)
    reserve = len(template.gen_prompt_ids) + min(max(max_tokens, 0), window // 4)
    if len(encoded.ids) + reserve <= window:
        return Prepared(msgs, encoded)
    start = view_start(_lengths(msgs, encoded), [m.role for m in msgs], reserve, window)
    if not start:
        return Prepared(msgs, encoded)
    system = next((i for i, m in enumerate(msgs) if m.role != "system"), len(msgs))
    visible = msgs[:system] + msgs[start:]
    return Prepared(visible, template.encode(visible), start)


def _lengths(msgs: tuple[Message, ...], encoded: Encoded) -> list[int]:
    """Each message's tokens: from the message bounds, or (a template that is not append-only has
    none) the ids shared out by characters, which is as deterministic."""
    if encoded.bounds is not None and len(encoded.bounds) == len(msgs):
        return [b - a for a, b in zip([0, *encoded.bounds[:-1]], encoded.bounds)]
    chars = [len(m.content) + 1 for m in msgs]
    return [len(encoded.ids) * c // sum(chars) for c in chars]


def encode_raw(template: ChatTemplate, msgs: tuple[Message, ...]) -> Encoded:
    """A raw prompt's ids (Chat.raw: one message, its text as is): the tokenizer's own way, with
    its special tokens (a BOS where the model has one; markers written in the text are markers),
    and no message bounds (its KV is found again by token prefix)."""
    check_raw(msgs)
    return Encoded(list(template.tokenizer(msgs[0].content, add_special_tokens=True)["input_ids"]), None)


def check_raw(msgs: tuple[Message, ...]) -> None:
    if len(msgs) != 1 or not msgs[0].content or msgs[0].images:
        raise InvalidRequest("A raw prompt is one text, and not an empty one.")


Forward = Callable[[Command, float, Prepared | None], None]


class TokenizerStage:
    """Commands pass through in order. Until `start()` (and in the terminal chat and tests, which
    step the worker themselves) a command is prepared on the caller's thread; after it, on the
    stage's thread. Stop, Shutdown and Reset never wait behind a long tokenisation."""

    def __init__(self, template: ChatTemplate, forward: Forward, max_chars: int, window: int = 0) -> None:
        self.template, self.forward, self.max_chars, self.window = template, forward, max_chars, window
        self._queue: deque[tuple[Command, float]] = deque()
        self._busy: tuple[Command, float] | None = None  # being prepared on the stage thread
        self._busy_sent = False  # it was sent on early (a Stop or Shutdown flushed the stage)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def pending(self) -> int:
        """Commands held in the stage (queued or being prepared)."""
        with self._cond:
            return len(self._queue) + (self._busy is not None and not self._busy_sent)

    def start(self) -> None:
        """Prepare on a thread of the stage from now on (the worker's serve loop calls this)."""
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="tokenizer-stage", daemon=True)
                self._thread.start()

    def submit(self, cmd: Command, t_arrival: float) -> None:
        with self._cond:
            if self._thread is None:  # not started: prepare here, in order (callers are serialised)
                self.forward(cmd, t_arrival, self._prepare(cmd))
            elif self._closed:  # after Shutdown: the worker answers (or has gone), nothing to prepare
                self.forward(cmd, t_arrival, None)
            elif isinstance(cmd, (Shutdown, Reset)):
                self._flush(None)
                self.forward(cmd, t_arrival, None)
                self._closed = self._closed or isinstance(cmd, Shutdown)
                self._cond.notify()
            elif isinstance(cmd, Stop):
                self._flush(cmd.request_id)  # the request itself goes on first, unprepared
                self.forward(cmd, t_arrival, None)
            elif not self._needs_stage(cmd):
                self.forward(cmd, t_arrival, None)
            else:
                self._queue.append((cmd, t_arrival))
                self._cond.notify()

    def _needs_stage(self, cmd: Command) -> bool:
        """Chats and session starts are prepared; anything of a session with a command still in the
        stage waits behind it (a session's commands stay in order)."""
        if isinstance(cmd, (Chat, CreateSession)):
            return True
        session = getattr(cmd, "session_id", None)
        held = [c for c, _ in self._queue] + ([self._busy[0]] if self._busy and not self._busy_sent else [])
        return session is not None and any(getattr(c, "session_id", None) == session for c in held)

    def _flush(self, request_id: str | None) -> None:
        """Send on, unprepared and in order, what the stage holds: everything (None) or the
        commands up to `request_id`'s. Nothing if `request_id` is not in the stage."""
        held = ([self._busy] if self._busy and not self._busy_sent else []) + list(self._queue)
        ids = [c.request_id for c, _ in held]
        if request_id is not None and request_id not in ids:
            return
        upto = len(held) if request_id is None else ids.index(request_id) + 1
        for i, (cmd, t) in enumerate(held[:upto]):
            if self._busy is not None and i == 0 and held[0] is self._busy:
                self._busy_sent = True
            else:
                self._queue.popleft()
            self.forward(cmd, t, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                self._busy, self._busy_sent = self._queue.popleft(), False
            cmd, t = self._busy
            prepared = self._prepare(cmd)  # outside the lock: Stop and Shutdown go through meanwhile
            with self._cond:
                if not self._busy_sent:
                    self.forward(cmd, t, prepared)
                self._busy = None

    def _prepare(self, cmd: Command) -> Prepared | None:
        """The request's messages and ids (None: nothing to prepare). Never raises: where the
        command is wrong, the loop reads it again and refuses it with the reason."""
        try:
            if isinstance(cmd, Chat):
                msgs = parse_messages(cmd.messages, self.max_chars, chat_chars(cmd))
                if cmd.overflow == "slide" and self.window and not cmd.raw:
                    return fit_view(self.template, msgs, self.template.encode(msgs), self.window,
                                    as_params(cmd.params).max_tokens)
            elif isinstance(cmd, CreateSession) and isinstance(cmd.system, str) and cmd.system:
                msgs = parse_messages([{"role": "system", "content": cmd.system}], self.max_chars)
            else:
                return None
            return Prepared(msgs, encode_raw(self.template, msgs) if getattr(cmd, "raw", False) else self.template.encode(msgs))
        except Exception:  # an invalid request: the loop refuses it with the reason
            log.debug("Tokenizer stage skipped %s", getattr(cmd, "request_id", cmd), exc_info=True)
            return None
