"""The worker loop's postprocess: sampled tokens → streamed text and finish reasons, and every event
a request sends (PrefillProgress, PrefillDone, ChunkEvent, Done, ErrorEvent) with its stats."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Callable

from desktop.errors import OmnideskError
from desktop.model.chat_template import ChatTemplate
from desktop.model.detok import StreamDecoder
from desktop.protocol import CacheReason, ChunkEvent, Done, ErrorEvent, Event, FinishReason, MatchKind, PrefillDone, PrefillProgress
from desktop.workers.scheduler import Scheduler
from desktop.workers.sequence import Seq
from desktop.workers.stats import WorkerCounters, finish_stats


class Output:
    def __init__(self, scheduler: Scheduler, template: ChatTemplate, emit: Callable[[Event], None],
                 clock: Callable[[], float], counters: WorkerCounters, progress_s: float) -> None:
        self.sched, self.template, self.emit, self.clock, self.counters = scheduler, template, emit, clock, counters
        self.progress_s = progress_s  # PrefillProgress events of one request: at most one per progress_s

    def progress(self, seq: Seq) -> None:
        """Tell how far a long prefill is: after its first chunk, then at most every progress_s."""
        now = self.clock()
        if seq.t_progress and now - seq.t_progress < self.progress_s:
            return
        seq.t_progress = now
        self.emit(PrefillProgress(seq.request_id, seq.num_kv, seq.num_prompt, seq.cached,
                                  1000.0 * (now - seq.t_admitted)))

    def prefill_done(self, seq: Seq) -> None:
        seq.t_prefilled = self.clock()
        p, slid = seq.placement, _slid(seq)
        if slid:  # the turn's one true reason: the view moved on (the badge and the stats say so)
            p = seq.placement = dataclasses.replace(p, miss_reason=CacheReason.SLID.value)
        self.emit(PrefillDone(seq.request_id, seq.num_prompt, p.cached, p.kind, seq.prefill_ms, p.slot.index, p.miss_reason,
                              seq.window_start, slid))

    def accept(self, seq: Seq, token: int) -> str | None:
        """Take a sampled token: stream its text; return a finish reason when the sequence ends."""
        seq.generated.append(token)
        seq.t_last = self.clock()
        if self.sched.is_eos(seq, token):
            return "stop"
        if seq.decoder is None:
            seq.decoder = StreamDecoder(self.template.tokenizer, seq.params.stop)
        text = seq.decoder.push(token)
        if text:
            self.emit(ChunkEvent(seq.request_id, text, (token,)))
        if seq.decoder.stopped:
            return "stop"
        if len(seq.generated) >= seq.max_new:  # which limit: the reply's own, or the context window's
            at_limit = seq.params is not None and len(seq.generated) >= seq.params.max_tokens
            return FinishReason.LENGTH.value if at_limit else FinishReason.WINDOW.value
        return None

    def flush(self, seq: Seq) -> str:
        """The reply's held-back tail goes out; returns the reply's whole text."""
        if seq.decoder is None:
            return ""
        tail = seq.decoder.finish()
        if tail:
            self.emit(ChunkEvent(seq.request_id, tail))
        return seq.decoder.text

    def done(self, seq: Seq, reason: str, text: str) -> None:
        stats = finish_stats(seq, reason)
        if not seq.warm:  # a warm is no turn of the user's: the hit rate counts turns
            self.counters.record(stats)
        self.emit(Done(seq.request_id, text, stats, self.sched.table.infos(), tuple(seq.generated)))

    def error(self, seq: Seq, err: OmnideskError) -> None:
        self.counters.errors += 1
        self.emit(ErrorEvent(seq.request_id, err.code, err.message, err.retryable))


def _slid(seq: Seq) -> bool:
    """A chat's view after a slide was built this turn: its KV did not hold the first message the
    model sees after the system prompt (the rebuild starts from the system prompt's KV)."""
    p = seq.placement
    if seq.session is not None or not seq.window_start:
        return seq.slid
    system = sum(1 for _ in itertools.takewhile(lambda m: m.role == "system", seq.msgs))
    if p.bounds is None or len(p.bounds) <= system:
        return p.kind not in (MatchKind.HIT.value, MatchKind.EXTEND.value)
    return p.cached < p.bounds[system]
