"""The worker's scheduler: plain Python over ids and lengths, no torch (tested without a model).

It owns the queues (waiting → prefilling → running), the slots, sessions and the system prompt
cache, and decides: which request is admitted where (admission.py), which prefill chunks run in a
tick under the token budget, which sequences form the decode batch, and what a stop, a failure,
the end of a session or a reset does to them. What it wants done to the KV it queues in `ops`
(kv_ops) for the runner; the worker loop runs the model and reports back (prefilled, decoded,
finish, fail).

A warm (a prefill-only chat: the draft the user is typing) has the lowest priority: it is admitted
only while no real request waits or runs, never evicts a slot, prefills in small chunks, and
steps aside (ends, its KV kept) as soon as a real request waits (`yielding`)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from desktop.errors import UnknownSession
from desktop.model.chat_template import ChatTemplate
from desktop.model.images import safe_cut
from desktop.model.messages import prefix_hashes
from desktop.workers.admission import Admission
from desktop.workers.config import WorkerConfig
from desktop.workers.kv_disk.state import SnapState
from desktop.workers.kv_ops import Clear, KvOp, Spill
from desktop.workers.matcher import Matcher
from desktop.workers.sequence import Phase, Seq, Session
from desktop.workers.slots import Footprint, Slot, SlotTable
from desktop.workers.spc import SystemPromptCache

WARM_CHUNK = 64  # ids per forward of a warm: what a real request that arrives may have to wait for


@dataclass(slots=True)
class PrefillPlan:
    """One tick's prefill work: requests to end (stopped while prefilling), then chunks (seq, n
    ids from seq.num_kv); a chunk that completes a generating prompt samples its first token."""

    cancelled: list[Seq] = field(default_factory=list)
    chunks: list[tuple[Seq, int]] = field(default_factory=list)


@dataclass(slots=True)
class DecodePlan:
    """One tick's decode step: requests to end (stopped while running), then the batch."""

    stopped: list[Seq] = field(default_factory=list)
    batch: list[Seq] = field(default_factory=list)


class Scheduler:
    def __init__(self, config: WorkerConfig, template: ChatTemplate, window: int, kv_bytes_per_token: int,
                 clock: Callable[[], float], footprint: Footprint | None = None, disk: Any = None) -> None:
        """`disk`: the kv_disk.store.DiskStore of the disk tier (None: none)."""
        config = config.sized(kv_bytes_per_token)
        self.cfg, self.template, self.window, self.clock = config, template, window, clock
        self.ops: deque[KvOp] = deque()  # for the runner, in order
        self.disk = disk if config.cache_mode.imc else None
        self.table = SlotTable(config.num_slots, kv_bytes_per_token, config.kv_budget_bytes, clock,
                               on_evict=self._evicted, footprint=footprint)
        self.matcher = Matcher(self.table, template, config.cache_mode, config.cache_min_tokens, self.disk)
        self.spc = SystemPromptCache()
        self.sessions: dict[str, Session] = {}
        self.admission = Admission(self.table, self.matcher, self.spc, self.sessions, template, config, window,
                                   self.ops, clock, self.spill)
        self.waiting: deque[Seq] = deque()
        self.prefilling: list[Seq] = []
        self.running: dict[str, Seq] = {}  # decoding, in the order they joined

    # ------------------------------------------------------------------ the disk tier

    def _evicted(self, slot: Slot) -> None:
        """A slot's conversation leaves RAM: saved to disk first when it is worth it, then dropped."""
        self.spill(slot)
        self.ops.append(Clear(slot.index))

    def spill(self, slot: Slot) -> bool:
        """Queue the saving of an idle slot's conversation to disk (a Spill op: the KV is copied
        when the ops run, before anything else touches the slot). Only a provable conversation
        (message hashes) of at least cache_min_tokens ids, never a session's."""
        if self.disk is None or not slot.hashes or slot.session_id is not None:
            return False
        if len(slot.ids) < self.cfg.cache_min_tokens:
            return False
        state = SnapState.of(slot)
        if self.disk.holds(state):  # e.g. restored from disk and not grown since: the file is there
            return False
        self.ops.append(Spill(slot.index, state))
        return True

    def spill_all(self) -> int:
        """At shutdown: queue every idle conversation for the disk; returns how many."""
        return sum(self.spill(slot) for slot in self.table.slots if slot.ids and slot.request_id is None)

    # ------------------------------------------------------------------ queues

    @property
    def num_active(self) -> int:
        return len(self.prefilling) + len(self.running)

    def active(self) -> list[Seq]:
        return [*self.prefilling, *self.running.values()]

    def every(self) -> list[Seq]:
        return [*self.waiting, *self.active()]

    def has_work(self) -> bool:
        return bool(self.waiting or self.prefilling or self.running)

    def add(self, seq: Seq) -> None:
        self.waiting.append(seq)

    # ------------------------------------------------------------------ a tick

    def next_waiting(self) -> Seq | None:
        """The next request to admit (taken off the queue), while fewer than max_running run:
        real requests first come first served; a warm only when no real request waits or runs."""
        if not self.waiting or self.num_active >= self.cfg.max_running:
            return None
        seq = next((s for s in self.waiting if not s.warm), None)
        if seq is None and any(not s.warm for s in self.active()):
            return None
        seq = seq or self.waiting[0]
        self.waiting.remove(seq)
        return seq

    def yielding(self) -> list[Seq]:
        """Active warms to end now, before anything is admitted (the loop finishes them, so their
        KV stays cached): every one while a real request waits, and those stopped (superseded
        by a newer draft), so that the slot they hold is free for what comes next."""
        real_waits = any(not s.warm for s in self.waiting)
        return [s for s in self.prefilling if s.warm and (real_waits or s.stop_requested)]

    def warm_fits(self, seq: Seq) -> bool:
        """A warm is only worth a slot it takes without evicting anything: the one holding its
        conversation (all of the slot's messages but maybe the last are its own) or an empty
        one, within the KV budget as it is."""
        table, slot = self.table, None
        if self.cfg.cache_mode.imc and (found := table.find_by_hash(prefix_hashes(seq.msgs))) is not None:
            slot = found[0] if found[1] >= len(found[0].hashes) - 1 else None
        slot = slot or table.empty_slot()
        if slot is None:
            return False
        n = len(seq.encoded.ids) + len(self.template.gen_prompt_ids) if seq.encoded is not None else 0
        return table.footprint([s.tokens for s in table.slots if s is not slot] + [n]) <= table.budget_bytes

    def admit(self, seq: Seq) -> bool:
        """Place `seq` (raises OmnideskError, the request failing alone). True when it has nothing
        to prefill nor generate (a session's input already cached): the loop ends it at once."""
        self.admission.place(seq)
        if seq.to_prefill == 0 and not seq.generate:
            return True
        self.prefilling.append(seq)
        return False

    def schedule_prefill(self) -> PrefillPlan:
        """Chunks of at most prefill_chunk ids, first come first served, up to prefill_budget ids;
        a warm gets a chunk (of at most WARM_CHUNK) only while no real request is active."""
        plan, budget = PrefillPlan(), self.cfg.prefill_budget
        real = any(not s.warm for s in self.active())
        for seq in self.prefilling:
            if seq.stop_requested:
                plan.cancelled.append(seq)
            elif seq.warm and real:
                continue
            elif budget > 0:
                n = min(budget, self.cfg.prefill_chunk, seq.to_prefill, WARM_CHUNK if seq.warm else budget)
                if seq.media:  # a vision tower encodes an image in one piece: chunks never split one
                    n = safe_cut(seq.prompt, seq.num_kv, n)
                plan.chunks.append((seq, n))
                budget -= n
        return plan

    def schedule_decode(self) -> DecodePlan:
        plan = DecodePlan()
        for seq in self.running.values():
            (plan.stopped if seq.stop_requested else plan.batch).append(seq)
        return plan

    # ------------------------------------------------------------------ results

    def prefilled(self, seq: Seq, n: int) -> None:
        """n more prompt ids are in the KV."""
        seq.num_kv += n

    def start_decoding(self, seq: Seq) -> None:
        """Its first token is sampled and it goes on: it joins the decode batch."""
        self.prefilling.remove(seq)
        self.running[seq.request_id] = seq

    def decoded(self, batch: list[Seq]) -> None:
        """A decode step put each row's last token into the KV."""
        for seq in batch:
            seq.num_kv += 1

    def is_eos(self, seq: Seq, token: int) -> bool:
        return token in self.template.eos_ids and not seq.params.ignore_eos

    def finish(self, seq: Seq, kv_len: int, text: str) -> None:
        """The placed request ended normally; `kv_len`: the runner's length of its slot's KV."""
        self._detach(seq)
        self.admission.release(seq, kv_len, text)

    def fail(self, seq: Seq) -> None:
        """The request ends with an error, in whatever phase: its slot's KV is dropped."""
        if seq.phase is Phase.WAITING:
            if seq in self.waiting:
                self.waiting.remove(seq)
            if seq.session is not None:
                seq.session.busy = None
            return
        self._detach(seq)
        self.admission.abandon(seq)

    def _detach(self, seq: Seq) -> None:
        if self.running.pop(seq.request_id, None) is None and seq in self.prefilling:
            self.prefilling.remove(seq)

    # ------------------------------------------------------------------ commands

    def stop(self, request_id: str) -> Seq | None:
        """A waiting request leaves the queue at once (returned, still WAITING); an active one is
        marked and ends at its next tick (returned); None when the request is not here."""
        for seq in self.waiting:
            if seq.request_id == request_id:
                self.waiting.remove(seq)
                if seq.session is not None:
                    seq.session.busy = None
                return seq
        for seq in self.active():
            if seq.request_id == request_id:
                seq.stop_requested = True
                return seq
        return None

    def end_session(self, session_id: str) -> tuple[Session | None, list[Seq]]:
        """Forget the session; returns it and its requests: waiting ones are already dequeued, the
        loop ends the active ones, then calls close_session."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return None, []
        seqs = [s for s in self.every() if s.session is session]
        for seq in seqs:
            if seq.phase is Phase.WAITING:
                self.waiting.remove(seq)
        return session, seqs

    def truncate_reply(self, session_id: str, text: str) -> None:
        """Replace the session's last reply by `text` (see Admission.truncate_reply); the KV ops
        it needs are queued. Raises UnknownSession / InvalidRequest."""
        session = self.sessions.get(session_id)
        if session is None:
            raise UnknownSession(f"Unknown session {session_id!r}: it was never created or has ended.")
        self.admission.truncate_reply(session, text)

    def close_session(self, session: Session) -> None:
        self.admission.clear(session.slot)
        session.slot.session_id = None

    def reset(self) -> None:
        """After every request was failed: end every session and empty every slot."""
        self.sessions.clear()
        for slot in self.table.slots:
            self.admission.clear(slot)
            slot.request_id = slot.session_id = None
