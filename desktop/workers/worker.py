"""The worker loop: one model runner, one scheduler, commands in and events out (continuous batching).

Each tick: take commands → admit waiting requests (the scheduler places them; the runner applies
the KV ops) → prefill chunks under the token budget → one batched decode step for every running
sequence; after each run, postprocess (tokens → text, finish reasons, events). Hosts (thread,
subprocess) only move commands in and events out; this code is the same in both. An exception
while serving one request ends that request with an error event; one that escapes a tick is a bug
of the loop itself and reaches the host, which reports the worker down and brings it back."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from desktop.errors import OmnideskError
from desktop.model.grammar import Grammars
from desktop.model.loader import LoadedModel
from desktop.model.messages import char_limit
from desktop.protocol import Command, Event, Heartbeat
from desktop.workers.commands import CommandIntake
from desktop.workers.config import WorkerConfig
from desktop.workers.heartbeat import Pulse
from desktop.workers.kv_ops import Clear, apply
from desktop.workers.output import Output
from desktop.workers.runner import DecodeRow, Runner, make_runner
from desktop.workers.scheduler import Scheduler
from desktop.workers.sequence import Seq
from desktop.workers.stats import WorkerCounters
from desktop.workers.tokenizer_stage import TokenizerStage

log = logging.getLogger(__name__)
PROGRESS_S = 0.2  # PrefillProgress events of one request: at most 5 a second


class Worker:
    """Single-threaded engine; `submit` may be called from any thread, everything else from one."""

    def __init__(self, loaded: LoadedModel, config: WorkerConfig = WorkerConfig(),
                 emit: Callable[[Event], None] = lambda e: None, clock: Callable[[], float] = time.perf_counter,
                 runner: Runner | None = None) -> None:
        self.lm, self.clock = loaded, clock
        config = config.sized(loaded.kv_bytes_per_token)  # the slot count, when the KV budget decides it
        template = loaded.template
        self.runner = runner if runner is not None else make_runner(loaded, config)
        self.disk, self.writer = _disk_tier(loaded, config, self.runner)
        self.scheduler = Scheduler(config, template, loaded.context_length, loaded.kv_bytes_per_token, clock,
                                   getattr(self.runner, "footprint", None), self.disk)
        self.counters = WorkerCounters()
        self.grammars = Grammars(template.tokenizer, template.eos_ids)  # constrained replies (lazy)
        self.out = Output(self.scheduler, template, emit, clock, self.counters, PROGRESS_S)
        self.intake = CommandIntake(self.scheduler, loaded.context_length, emit, clock, self._finish, self._fail)
        # commands reach the inbox through the tokenizer stage: ids are made before the loop sees them
        self.stage = TokenizerStage(template, self.intake.put, char_limit(loaded.context_length), loaded.context_length)

    # ------------------------------------------------------------------ surface used by hosts

    @property
    def resets(self) -> int:
        """Reset commands handled (the thread host waits for one before it takes the worker back)."""
        return self.intake.resets

    def submit(self, cmd: Command) -> None:
        self.stage.submit(cmd, self.clock())

    def has_work(self) -> bool:
        return self.scheduler.has_work() or not self.intake.empty()

    # ------------------------------------------------------------------ driving

    def step(self) -> bool:
        """One tick; returns whether work remains."""
        self.intake.drain()
        self._sync()
        self._admit()
        self._prefill_tick()
        self._decode_tick()
        return self.has_work()

    def serve(self, idle_wait: float = 0.05, beat: Callable[[Heartbeat], None] | None = None,
              beat_s: float = 0.5) -> None:
        """Run until Shutdown: block on the inbox while idle, tick while busy. With `beat`, send a
        Heartbeat at least every `beat_s`, idle or busy (see heartbeat.Pulse). An exception that
        escapes here is a bug of the loop: the host reports the worker down."""
        self.stage.start()  # from now on a long tokenisation runs beside the loop, not in it
        pulse = Pulse(beat or (lambda _: None), beat_s)
        if beat is not None:
            self.runner.watch_layers(pulse.layer)
        try:
            while not self.intake.closed:
                if not self.scheduler.has_work():
                    pulse.idle(self.resets)
                    self.intake.wait(idle_wait)
                    if not self.has_work():
                        continue
                self.step()
                pulse.tick(self.scheduler.num_active + len(self.scheduler.waiting), self.resets)
            self.close()
        finally:
            self.runner.watch_layers(None)

    def close(self, timeout: float = 15.0) -> None:
        """After Shutdown (a model reload, the app quitting): every idle conversation goes to disk,
        and the writer gets at most `timeout` s to finish."""
        if self.writer is None:
            return
        self.scheduler.spill_all()
        self._sync()
        if not self.writer.close(timeout):
            log.warning("KV snapshots still being written after %.0f s: the rest are lost", timeout)

    # ------------------------------------------------------------------ a tick: schedule → run → postprocess

    def _admit(self) -> None:
        for seq in self.scheduler.yielding():  # warms step aside for real work; their KV stays cached
            self._guard(seq, self._finish, seq, "cancelled")
        while (seq := self.scheduler.next_waiting()) is not None:
            if seq.warm and not self.scheduler.warm_fits(seq):  # a warm never evicts: skipped
                self.out.done(seq, "cancelled", "")
                continue
            self._guard(seq, self._admit_one, seq)

    def _admit_one(self, seq: Seq) -> None:
        complete = self.scheduler.admit(seq)
        self._sync()  # copy, crop or restore its KV (a failure here is this request's)
        if complete:
            self.out.prefill_done(seq)
            self._finish(seq, "prefilled")

    def _prefill_tick(self) -> None:
        plan = self.scheduler.schedule_prefill()
        for seq in plan.cancelled:
            self._guard(seq, self._finish, seq, "cancelled")
        for seq, n in plan.chunks:
            self._guard(seq, self._prefill_chunk, seq, n)

    def _prefill_chunk(self, seq: Seq, n: int) -> None:
        """Prefill the next `n` ids of one sequence; once all are in, sample its first token."""
        last = n == seq.to_prefill
        sample = None
        if last and seq.generate:
            seq.sampler = self.runner.sampler(seq.params)
            if seq.params.grammar:
                seq.sampler.constraint = self.grammars.constraint(seq.params.grammar)
            sample = (seq.sampler, seq.prompt)
        token = self.runner.prefill(seq.slot.index, seq.prompt[seq.num_kv : seq.num_kv + n], sample, seq.media or None)
        self.scheduler.prefilled(seq, n)
        if not last:
            self.out.progress(seq)
            return
        self.out.prefill_done(seq)
        if not seq.generate:
            self._finish(seq, "prefilled")
            return
        seq.t_first = self.clock()
        reason = self.out.accept(seq, token)
        if reason:
            self._finish(seq, reason)
        else:
            self.scheduler.start_decoding(seq)

    def _decode_tick(self) -> None:
        plan = self.scheduler.schedule_decode()
        for seq in plan.stopped:
            self._guard(seq, self._finish, seq, "stopped")
        if not plan.batch:
            return
        rows = [DecodeRow(s.slot.index, s.generated[-1], s.sampler, s.ids if s.sampler.needs_history else ())
                for s in plan.batch]
        try:
            tokens = self.runner.decode(rows)
        except Exception as exc:  # the batched KV is now unreliable: fail every row
            err = _as_error(exc)
            for seq in plan.batch:
                self._fail(seq, err)
            return
        self.scheduler.decoded(plan.batch)
        for seq, token in zip(plan.batch, tokens):
            if isinstance(token, Exception):
                self._contain(seq, token)
            else:
                self._guard(seq, self._take, seq, token)

    def _take(self, seq: Seq, token: int) -> None:
        reason = self.out.accept(seq, token)
        if reason:
            self._finish(seq, reason)

    # ------------------------------------------------------------------ ending requests

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
            log.warning("Request %s failed in the worker", seq.request_id, exc_info=exc)
        self._fail(seq, _as_error(exc))

    def _finish(self, seq: Seq, reason: str) -> None:
        text = self.out.flush(seq)
        self.scheduler.finish(seq, self.runner.kv_len(seq.slot.index), text)
        self._sync()
        self.out.done(seq, reason, text)

    def _fail(self, seq: Seq, err: OmnideskError) -> None:
        self.scheduler.fail(seq)
        self._sync()
        self.out.error(seq, err)

    def _sync(self) -> None:
        """Apply the KV ops the scheduler queued, in order. If one raises, the ops after it that
        served the same decision are dropped (only Clears run: bookkeeping already dropped those
        slots) and the exception goes to the request being served."""
        ops = self.scheduler.ops
        while ops:
            op = ops.popleft()
            try:
                apply(op, self.runner, self.scheduler.spc.put, self.writer.submit if self.writer else None)
            except BaseException:
                kept = [o for o in ops if isinstance(o, Clear)]
                ops.clear()
                ops.extend(kept)
                raise


def _disk_tier(loaded: LoadedModel, config: WorkerConfig, runner: Runner) -> tuple[Any, Any]:
    """The disk tier's store (its folder indexed) and writer thread, or (None, None) when there is
    none: no folder configured, no message cache, or a runner that cannot pack its KV."""
    if not config.kv_dir or not config.cache_mode.imc or not getattr(runner, "kv_layout", ""):
        return None, None
    from desktop.workers.kv_disk import prefetch
    from desktop.workers.kv_disk.files import SnapshotDir
    from desktop.workers.kv_disk.fingerprint import fingerprint
    from desktop.workers.kv_disk.store import DiskStore
    from desktop.workers.kv_disk.writer import SpillWriter

    store = DiskStore(SnapshotDir(config.kv_dir), fingerprint(loaded.model, loaded.dtype, runner.kv_layout),
                      config.kv_disk_budget_bytes, runner.pack, runner.unpack)
    found = store.scan()
    log.info("KV snapshots on disk: %d in %s", found, config.kv_dir)
    prefetch.start(store.recent(prefetch.PREFETCH_BYTES))  # the next restore reads memory, not the disk
    return store, SpillWriter(store.write, min(config.kv_disk_budget_bytes, 1 << 30))


def _as_error(exc: Exception) -> OmnideskError:
    """The error event for an exception raised while serving one request. Not retryable unless it
    is memory: the same request would most likely fail the same way again."""
    if isinstance(exc, OmnideskError):
        return exc
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":  # torch's, without torch
        return OmnideskError("Out of memory while running the model; try a shorter conversation, fewer slots or bfloat16.", code="out_of_memory", retryable=True)
    return OmnideskError(f"The request failed inside the worker ({type(exc).__name__}: {exc}).", code="internal")
