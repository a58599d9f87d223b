"""A fake WorkerHost for gateway tests: N slots holding message-prefix hashes, a capacity, and
the real protocol's events, driven by hand (finish / fail / crash / recover) or by a timer thread."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from desktop.protocol import (
    AppendInput, Chat, ChunkEvent, Command, CreateSession, Done, EndSession, ErrorEvent, Generate,
    PrefillDone, SlotInfo, SlotState, Stop, TokenStats,
)
from desktop.model.messages import Message, history_hash, prefix_hashes
from desktop.protocol import EventSink, WorkerHost, WorkerState, WorkerStatus


@dataclass
class FakeSlot:
    index: int
    messages: tuple[Message, ...] = ()
    session_id: str | None = None
    last_used: int = 0
    active: str | None = None  # request id using it now

    def info(self) -> SlotInfo:
        state = SlotState.BUSY if self.active else SlotState.IDLE if self.messages else SlotState.EMPTY
        return SlotInfo(self.index, state,
                        tuple(prefix_hashes(self.messages)), 10 * len(self.messages), float(self.last_used),
                        self.session_id, 0)


@dataclass
class Run:
    cmd: Command
    slot: int
    kind: str


@dataclass
class FakeHost(WorkerHost):
    """Manual by default: a command is accepted (PrefillDone at once) and stays running until the
    test calls finish(rid) / fail(rid). With `auto` seconds, a timer thread finishes it (events
    then come from another thread, like a real thread host). Refusals a correct gateway never
    causes (over capacity, no free slot) are recorded in `violations`."""

    worker_id: str
    capacity: int = 1
    num_slots: int = 2
    auto: float | None = None
    reply: str = "Hi!"
    ready: bool = True
    send_slots: bool = True
    context_length: int = 0
    commands: list[Command] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    active: dict[str, Run] = field(default_factory=dict)
    closed: bool = False

    def __post_init__(self) -> None:
        self.slots = [FakeSlot(i) for i in range(self.num_slots)]
        self.sink: EventSink | None = None
        self._tick = 0
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ WorkerHost

    def start(self, sink: EventSink) -> None:
        self.sink = sink
        self._status(WorkerState.LOADING)
        if self.ready:
            self._status(WorkerState.IDLE)

    def submit(self, cmd: Command) -> None:
        with self._lock:
            self.commands.append(cmd)
            if isinstance(cmd, Stop):
                if cmd.request_id in self.active:
                    self.finish(cmd.request_id, finish_reason="cancelled")
                else:
                    self._emit(ErrorEvent(cmd.request_id, "unknown_request", "not running"))
                return
            if isinstance(cmd, EndSession):
                for s in self.slots:
                    if s.session_id == cmd.session_id:
                        s.session_id, s.messages = None, ()
                self._emit(Done(cmd.request_id, slots=self._snapshot()))
                return
            if len(self.active) >= self.capacity:
                self._refuse(cmd, "busy", f"over capacity {self.capacity}")
                return
            slot, kind = self._pick(cmd)
            if slot is None:
                self._refuse(cmd, "busy" if kind == "busy" else "unknown_session", f"no slot ({kind})")
                return
            self._tick += 1
            slot.active, slot.last_used = cmd.request_id, self._tick
            if isinstance(cmd, CreateSession):
                slot.session_id, slot.messages = cmd.session_id, ()
            self.active[cmd.request_id] = Run(cmd, slot.index, kind)
            self._emit(PrefillDone(cmd.request_id, 10, 0 if kind == "miss" else 5, kind, 1.0, slot.index))
        if self.auto is not None:
            timer = threading.Timer(self.auto, self._auto_finish, args=(cmd.request_id,))
            timer.daemon = True
            timer.start()

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self.closed = True
            for rid in list(self.active):
                self.fail(rid, "shutdown", "closing")

    # ------------------------------------------------------------------ test controls

    def finish(self, request_id: str, text: str | None = None, finish_reason: str = "stop") -> None:
        with self._lock:
            run = self.active.pop(request_id)
            slot = self.slots[run.slot]
            slot.active = None
            cmd = run.cmd
            text = self.reply if text is None else text
            if isinstance(cmd, Chat):
                slot.messages = cmd.messages + (Message("assistant", text),)
            elif isinstance(cmd, CreateSession):
                slot.messages = (Message("system", cmd.system),) if cmd.system else ()
            elif isinstance(cmd, AppendInput):
                slot.messages += cmd.messages
            elif isinstance(cmd, Generate):
                slot.messages += cmd.messages + (Message("assistant", text),)
            if isinstance(cmd, (Chat, Generate)):
                self._emit(ChunkEvent(request_id, text))
            stats = TokenStats(input_tokens=10, cached_tokens=5 if run.kind != "miss" else 0,
                               generated_tokens=1, kind=run.kind, miss_reason=_miss_reason(cmd, run.kind),
                               finish_reason=finish_reason, slot=run.slot)
            self._emit(Done(request_id, text, stats, self._snapshot() if self.send_slots else ()))

    def fail(self, request_id: str, code: str = "oops", message: str = "failed") -> None:
        with self._lock:
            run = self.active.pop(request_id)
            self.slots[run.slot].active = None
            if isinstance(run.cmd, CreateSession):  # the session never opened
                self.slots[run.slot].session_id = None
            self._emit(ErrorEvent(request_id, code, message))

    def crash(self, message: str = "segfault", restarting: bool = True) -> None:
        """The worker dies: its KV and running requests are gone, no events for them. Like a
        subprocess host, it says it is restarting (call recover()) unless told otherwise."""
        with self._lock:
            self.active.clear()
            self.slots = [FakeSlot(i) for i in range(self.num_slots)]
            self._status(WorkerState.ERROR, message, restarting=restarting)

    def recover(self) -> None:
        """A (re)started worker: empty, loading, then idle."""
        with self._lock:
            self.active.clear()
            self.slots = [FakeSlot(i) for i in range(self.num_slots)]
        self._status(WorkerState.LOADING)
        self._status(WorkerState.IDLE)

    def slot_of(self, messages: tuple[Message, ...]) -> int | None:
        """Index of the slot holding exactly this conversation, if any."""
        return next((s.index for s in self.slots if s.messages == tuple(messages)), None)

    # ------------------------------------------------------------------ internals

    def _auto_finish(self, request_id: str) -> None:
        with self._lock:
            if request_id in self.active and not self.closed:
                self.finish(request_id)

    def _pick(self, cmd: Command) -> tuple[FakeSlot | None, str]:
        if isinstance(cmd, (AppendInput, Generate)):
            slot = next((s for s in self.slots if s.session_id == cmd.session_id), None)
            if slot is not None and slot.active:
                return None, "busy"
            return slot, "extend" if slot else "no session"
        usable = [s for s in self.slots if s.active is None and s.session_id is None]
        if isinstance(cmd, Chat):
            h = history_hash(cmd.messages)
            hit = next((s for s in usable if h and h in prefix_hashes(s.messages)), None)
            if hit is not None:
                return hit, "extend"
        empty = [s for s in usable if not s.messages]
        if empty:
            return empty[0], "miss"
        if usable:
            return min(usable, key=lambda s: s.last_used), "miss"
        return None, "busy"

    def _refuse(self, cmd: Command, code: str, why: str) -> None:
        self.violations.append(f"{cmd.request_id}: {why}")
        self._emit(ErrorEvent(cmd.request_id, code, why))

    def _snapshot(self) -> tuple[SlotInfo, ...]:
        return tuple(s.info() for s in self.slots)

    def _emit(self, event: object) -> None:
        if self.sink is not None:
            self.sink(self.worker_id, event)  # type: ignore[arg-type]

    def _status(self, state: WorkerState, message: str = "", restarting: bool = False) -> None:
        if self.sink is not None:
            self.sink(self.worker_id, WorkerStatus(self.worker_id, state, message, capacity=self.capacity,
                                                   num_slots=self.num_slots, context_length=self.context_length,
                                                   restarting=restarting))


def _miss_reason(cmd: Command, kind: str) -> str:
    """As a real worker words it (workers/matcher.py): a chat that missed is new, or was not here."""
    if kind != "miss" or not isinstance(cmd, Chat):
        return ""
    new = len([m for m in cmd.messages if m.role != "system"]) == 1
    return "new conversation" if new else "not cached since the model loaded"
