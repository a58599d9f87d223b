"""The worker loop: owns one model, its KV slots and the scheduler (continuous batching).

Each tick: take commands → admit waiting requests (slot matching) → prefill under a token budget
(chunked) → one batched decode step for every running sequence. Hosts (thread, subprocess) only
move commands in and events out; this code is the same in both. An exception while serving one
request ends that request with an error event; one that escapes a tick is a bug of the loop
itself and reaches the host, which reports the worker down and brings it back."""

from __future__ import annotations

import logging
import queue
import time
from collections import deque
from typing import Callable

import torch

from desktop.protocol import (
    ChunkEvent,
    Command,
    Done,
    ErrorEvent,
    Event,
    Heartbeat,
    PrefillDone,
    PrefillProgress,
)
from desktop.errors import OmnideskError
from desktop.model import kv
from desktop.model.detok import StreamDecoder
from desktop.model.loader import LoadedModel
from desktop.model.messages import char_limit
from desktop.model.sampling import Sampler, sample_batch
from desktop.workers.config import WorkerConfig
from desktop.workers.heartbeat import Pulse
from desktop.workers.matcher import Matcher
from desktop.workers.sequence import Phase, Seq, Session
from desktop.workers.admission import Admission
from desktop.workers.commands import CommandIntake
from desktop.workers.slots import SlotTable
from desktop.workers.spc import SystemPromptCache
from desktop.workers.stats import WorkerCounters, finish_stats
from desktop.workers.tokenizer_stage import TokenizerStage

log = logging.getLogger(__name__)

PROGRESS_S = 0.2  # PrefillProgress events of one request: at most 5 a second


class Worker(CommandIntake):
    """Single-threaded engine; `submit` may be called from any thread, everything else from one."""

    def __init__(
        self,
        loaded: LoadedModel,
        config: WorkerConfig = WorkerConfig(),
        emit: Callable[[Event], None] = lambda e: None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.lm, self.cfg, self.emit, self.clock = loaded, config, emit, clock
        self.model, self.template = loaded.model, loaded.template
        self.device = self.model.device
        self.table = SlotTable(config.num_slots, loaded.kv_bytes_per_token, config.kv_budget_bytes, clock)
        self.matcher = Matcher(self.table, self.template, config.cache_mode, config.cache_min_tokens)
        self.spc = SystemPromptCache()
        self.batch = kv.DecodeBatch()
        self.inbox: queue.SimpleQueue[tuple[Command, float]] = queue.SimpleQueue()
        # commands reach the inbox through the tokenizer stage: ids are made before the loop sees them
        self.stage = TokenizerStage(self.template, lambda cmd, t: self.inbox.put((cmd, t)), char_limit(loaded.context_length))
        self.waiting: deque[Seq] = deque()
        self.prefilling: list[Seq] = []
        self.decoding: dict[str, Seq] = {}
        self.sessions: dict[str, Session] = {}
        self.counters = WorkerCounters()
        self.admission = Admission(self)
        self.closed = False
        self.resets = 0  # Reset commands handled (the host gave up on what ran here)

    # ------------------------------------------------------------------ driving

    def submit(self, cmd: Command) -> None:
        self.stage.submit(cmd, self.clock())

    @property
    def running(self) -> int:
        return len(self.prefilling) + len(self.decoding)

    def has_work(self) -> bool:
        return bool(self.waiting or self.prefilling or self.decoding) or not self.inbox.empty()

    def step(self) -> bool:
        """One scheduler tick; returns whether work remains."""
        with torch.no_grad():
            self._drain()
            self._admit()
            self._prefill_tick()
            self._decode_tick()
        return self.has_work()

    def run_until_idle(self, on_step: Callable[[], None] | None = None) -> None:
        while self.step():
            if on_step:
                on_step()
        if on_step:
            on_step()

    def serve(self, idle_wait: float = 0.05, beat: Callable[[Heartbeat], None] | None = None,
              beat_s: float = 0.5) -> None:
        """Run until Shutdown: block on the inbox while idle, tick while busy. With `beat`, send a
        Heartbeat at least every `beat_s`, idle or busy (see heartbeat.Pulse). An exception that
        escapes here is a bug of the loop: the host reports the worker down."""
        self.stage.start()  # from now on a long tokenisation runs beside the loop, not in it
        pulse = Pulse(beat or (lambda _: None), beat_s)
        if beat is not None:
            pulse.attach(self.model)
        try:
            while not self.closed:
                if not (self.waiting or self.prefilling or self.decoding):
                    pulse.idle(self.resets)
                    try:
                        item = self.inbox.get(timeout=idle_wait)
                    except queue.Empty:
                        continue
                    self._handle(*item)
                self.step()
                pulse.tick(self.running + len(self.waiting), self.resets)
        finally:
            pulse.detach()

    # ------------------------------------------------------------------ scheduling

    def _admit(self) -> None:
        while self.waiting and self.running < self.cfg.max_running:
            seq = self.waiting.popleft()
            self._guard(seq, self._admit_one, seq)

    def _admit_one(self, seq: Seq) -> None:
        self.admission.start(seq)
        if len(seq.kv_ids) >= len(seq.target) and not seq.generate:
            self._prefill_done(seq)
            self._finish(seq, "prefilled")
        else:
            self.prefilling.append(seq)

    def _guard(self, seq: Seq, step: Callable[..., object], *args: object) -> bool:
        """Run one request's part of a tick. Whatever it raises (a bad value that slipped past
        validation, a tokenizer or model error) ends that request alone with an error event."""
        try:
            step(*args)
            return True
        except Exception as exc:
            self._contain(seq, exc)
            return False

    def _contain(self, seq: Seq, exc: Exception) -> None:
        if not isinstance(exc, OmnideskError):
            log.warning("Request %s failed in the worker", seq.request_id, exc_info=True)
        self._fail(seq, _as_error(exc))

    def _prefill_tick(self) -> None:
        budget = self.cfg.prefill_budget
        for seq in list(self.prefilling):
            if seq.stop_requested:
                self._guard(seq, self._finish, seq, "cancelled")
                continue
            if budget <= 0:
                break
            n = min(budget, self.cfg.prefill_chunk, len(seq.target) - len(seq.kv_ids))
            if self._guard(seq, self._prefill_chunk, seq, n):
                budget -= n

    def _prefill_chunk(self, seq: Seq, n: int) -> None:
        """Prefill the next `n` ids of one sequence; once all are in, sample its first token."""
        start = len(seq.kv_ids)
        chunk = seq.target[start : start + n]
        out = self.model(
            input_ids=kv.as_batch(chunk, self.device),
            past_key_values=seq.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        seq.kv_ids += chunk
        if len(seq.kv_ids) < len(seq.target):
            self._progress(seq)
            return
        self._prefill_done(seq)
        if not seq.generate:
            self._finish(seq, "prefilled")
            return
        seq.sampler = Sampler(seq.params, str(self.device))
        seq.decoder = StreamDecoder(self.template.tokenizer, seq.params.stop)
        token = seq.sampler(out.logits[0, -1].float(), seq.target)
        seq.t_first = self.clock()
        reason = self._accept(seq, token)
        if reason:
            self._finish(seq, reason)
        else:
            self.prefilling.remove(seq)
            self.batch.add(seq.request_id, seq.cache)
            seq.cache, seq.phase = None, Phase.DECODE
            self.decoding[seq.request_id] = seq

    def _progress(self, seq: Seq) -> None:
        """Tell how far a long prefill is: after its first chunk, then at most every PROGRESS_S."""
        now = self.clock()
        if seq.t_progress and now - seq.t_progress < PROGRESS_S:
            return
        seq.t_progress = now
        self.emit(PrefillProgress(seq.request_id, len(seq.kv_ids), len(seq.target), seq.cached,
                                  1000.0 * (now - seq.t_prefill_start)))

    def _prefill_done(self, seq: Seq) -> None:
        seq.prefill_ms = 1000.0 * (self.clock() - seq.t_prefill_start)
        self.emit(PrefillDone(seq.request_id, len(seq.target), seq.cached, seq.kind, seq.prefill_ms, seq.slot.index, seq.miss_reason))

    def _decode_tick(self) -> None:
        for seq in [s for s in self.decoding.values() if s.stop_requested]:
            self._guard(seq, self._finish, seq, "stopped")
        if not self.decoding:
            return
        seqs = [self.decoding[k] for k in self.batch.keys]
        fed = [s.generated[-1] for s in seqs]
        try:
            out = self.model(**self.batch.step_inputs(fed, self.device), use_cache=True)
        except Exception as exc:  # the batched cache is now unreliable: fail every row
            err = _as_error(exc)
            for seq in seqs:
                self._fail(seq, err)
            self.batch = kv.DecodeBatch()
            return
        for seq, token in zip(seqs, fed):
            seq.kv_ids.append(token)
        for seq, token in zip(seqs, self._sample(seqs, out.logits[:, -1].float())):
            if token is not None:
                self._guard(seq, self._take, seq, token)

    def _sample(self, seqs: list[Seq], logits: torch.Tensor) -> list[int | None]:
        """One token per row; if the batch fails, each row alone, so only a failing row's
        request ends (None in its place)."""
        histories = [s.target + s.generated if s.sampler.needs_history else () for s in seqs]
        try:
            return sample_batch([s.sampler for s in seqs], logits, histories)
        except Exception:
            out: list[int | None] = []
            for i, seq in enumerate(seqs):
                try:
                    out.append(seq.sampler(logits[i], histories[i]))
                except Exception as exc:
                    self._contain(seq, exc)
                    out.append(None)
            return out

    def _take(self, seq: Seq, token: int) -> None:
        reason = self._accept(seq, token)
        if reason:
            self._finish(seq, reason)

    def _accept(self, seq: Seq, token: int) -> str | None:
        """Take a sampled token: stream its text; return a finish reason when the sequence ends."""
        seq.generated.append(token)
        seq.t_last = self.clock()
        if token in self.template.eos_ids and not seq.params.ignore_eos:
            return "stop"
        text = seq.decoder.push(token)
        if text:
            self.emit(ChunkEvent(seq.request_id, text, (token,)))
        if seq.decoder.stopped:
            return "stop"
        if len(seq.generated) >= seq.max_new:
            return "length"
        return None

    # ------------------------------------------------------------------ ending requests

    def _detach(self, seq: Seq):
        """Take the sequence out of the scheduler; return its batch-1 cache."""
        if seq.request_id in self.decoding:
            del self.decoding[seq.request_id]
            return self.batch.remove(seq.request_id)
        if seq in self.prefilling:
            self.prefilling.remove(seq)
        return seq.cache

    def _finish(self, seq: Seq, reason: str) -> None:
        cache = self._detach(seq)
        if seq.decoder is not None:
            tail = seq.decoder.finish()
            if tail:
                self.emit(ChunkEvent(seq.request_id, tail))
        text = seq.decoder.text if seq.decoder is not None else ""
        self.admission.release(seq, cache, text)
        stats = finish_stats(seq, reason, self.clock())
        self.counters.record(stats)
        self.emit(Done(seq.request_id, text, stats, self.table.infos(), tuple(seq.generated)))

    def _fail(self, seq: Seq, err: OmnideskError) -> None:
        if seq.phase is Phase.WAITING:
            if seq in self.waiting:
                self.waiting.remove(seq)
            if seq.session is not None:
                seq.session.busy = None
            if seq.slot is not None:  # setup got as far as taking a slot
                self.admission.abandon(seq)
        else:
            self._detach(seq)
            self.admission.abandon(seq)
        self.counters.errors += 1
        self._error(seq.request_id, err)

    def _error(self, request_id: str, err: OmnideskError) -> None:
        self.emit(ErrorEvent(request_id, err.code, err.message, err.retryable))

    # ------------------------------------------------------------------ introspection

    def check_integrity(self) -> None:
        """Raise AssertionError if slots, sessions or the batch disagree (tests call it after every step)."""
        active = {s.request_id for s in [*self.prefilling, *self.decoding.values()]}
        self.table.check_integrity(kv.agreed_len, active)  # every layer, not only the first
        for seq in self.decoding.values():
            assert self.batch.row_len(seq.request_id) == len(seq.kv_ids), "batch row length != sequence ids"
        for seq in self.prefilling:
            assert kv.agreed_len(seq.cache) == len(seq.kv_ids), "prefill cache length != sequence ids"
        assert len(self.batch) == len(self.decoding), "batch rows != decoding sequences"
        assert not self.decoding or kv.agreed_len(self.batch.cache) == self.batch.width, "batch layers disagree"
        for sid, session in self.sessions.items():
            assert session.slot.session_id == sid, "session's slot is not pinned to it"


def _as_error(exc: Exception) -> OmnideskError:
    """The error event for an exception raised while serving one request. Not retryable unless it
    is memory: the same request would most likely fail the same way again."""
    if isinstance(exc, OmnideskError):
        return exc
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return OmnideskError("Out of memory while running the model; try a shorter conversation, fewer slots or bfloat16.", code="out_of_memory", retryable=True)
    return OmnideskError(f"The request failed inside the worker ({type(exc).__name__}: {exc}).", code="internal")

