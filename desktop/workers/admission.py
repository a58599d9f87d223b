"""Admission and release of requests in a worker: pick the slot, keep the reusable KV, check the
context window and the memory budget; afterwards record what the slot or session now holds."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from desktop.protocol import AppendInput, Chat, CreateSession, Generate, MatchKind
from desktop.errors import ContextOverflow, InvalidRequest
from desktop.model import kv
from desktop.model.messages import Message
from desktop.workers.sequence import Phase, Seq, Session

if TYPE_CHECKING:
    from desktop.workers.worker import Worker

log = logging.getLogger(__name__)


class Admission:
    def __init__(self, worker: Worker) -> None:
        self.w = worker

    # ------------------------------------------------------------------ start

    def start(self, seq: Seq) -> None:
        """Plan, check and claim; raises OmnideskError leaving slots and sessions unchanged."""
        cmd = seq.command
        if isinstance(cmd, Chat):
            self._plan_chat(seq)
        elif isinstance(cmd, CreateSession):
            self._plan_create(seq, cmd)
        elif isinstance(cmd, AppendInput):
            self._plan_append(seq)
        else:
            self._plan_generate(seq)
        self._check(seq)
        self._claim(seq)

    def _plan_chat(self, seq: Seq) -> None:
        plan = self.w.matcher.plan(seq.msgs)
        seq.slot, seq.target, seq.canon, seq.bounds = plan.slot, plan.prompt, plan.canon, plan.bounds
        seq.kind, seq.miss_reason, seq.cached = plan.kind.value, plan.miss_reason, plan.reuse
        seq.generate = seq.params.max_tokens > 0
        seq.spc_ids = plan.spc_ids
        if plan.source is not None:  # copy now: the budget check may evict the source afterwards
            seq.cache = kv.clone_prefix(plan.source.kv, plan.reuse)
            seq.kv_ids = plan.source.ids[: plan.reuse]

    def _plan_create(self, seq: Seq, cmd: CreateSession) -> None:
        seq.slot = self.w.table.take_free()
        seq.generate = False
        seq.msgs = (Message("system", cmd.system),) if cmd.system else ()
        seq.target = self.w.template.encode(seq.msgs).ids if seq.msgs else []
        if seq.target and self.w.cfg.cache_mode.spc:
            seq.spc_ids, seq.kind, seq.cached = seq.target, MatchKind.SPC.value, len(seq.target)

    def _plan_append(self, seq: Seq) -> None:
        session = seq.session
        try:
            delta = self.w.template.encode_delta(session.history, seq.msgs).ids
        except ValueError:
            raise InvalidRequest("This model's chat template cannot be extended message by message; use plain chat.") from None
        seq.slot, seq.generate = session.slot, False
        seq.target = session.slot.ids + session.pending + delta
        seq.cached = len(session.slot.ids)
        seq.kind = MatchKind.EXTEND.value if seq.cached else MatchKind.MISS.value

    def _plan_generate(self, seq: Seq) -> None:
        session = seq.session
        seq.slot, seq.generate = session.slot, True
        seq.target = session.slot.ids + session.pending + self.w.template.gen_prompt_ids
        seq.cached = min(len(session.slot.ids), len(seq.target) - 1)
        new = len(seq.target) - seq.cached
        seq.kind = (MatchKind.HIT if new <= len(self.w.template.gen_prompt_ids) else MatchKind.EXTEND).value
        if not seq.cached:
            seq.kind = MatchKind.MISS.value

    def _check(self, seq: Seq) -> None:
        ctx = self.w.lm.context_length
        if len(seq.target) > (ctx - 1 if seq.generate else ctx):
            raise ContextOverflow(
                f"This conversation is {len(seq.target)} tokens long; the model's context window is {ctx} "
                "tokens. Start a new conversation or shorten the message."
            )
        seq.max_new = min(seq.params.max_tokens, ctx - len(seq.target)) if seq.generate else 0
        self.w.table.reserve(seq.slot, len(seq.target) + seq.max_new)

    def _claim(self, seq: Seq) -> None:
        slot, w = seq.slot, self.w
        if isinstance(seq.command, CreateSession):
            session = Session(seq.command.session_id, slot, list(seq.msgs), busy=seq.request_id)
            w.sessions[session.session_id] = session
            slot.session_id, seq.session = session.session_id, session
        elif isinstance(seq.command, AppendInput):
            seq.session.history += seq.msgs
        slot.request_id = seq.request_id
        if seq.cache is not None:
            pass  # a branch copied during planning
        elif seq.spc_ids and (w.spc.has(seq.spc_ids) or len(seq.spc_ids) <= w.cfg.prefill_chunk):
            seq.cache = w.spc.get(seq.spc_ids, self.build_kv, w.device)  # a build is one forward at most
            seq.kv_ids = list(seq.spc_ids)
        elif seq.spc_ids:  # building it here would stall every running reply: prefill it in chunks
            seq.cache, seq.kv_ids, seq.cached = kv.new_cache(w.model.config), [], 0
            seq.kind, seq.spc_after = MatchKind.MISS.value, True
        elif seq.cached and slot.kv is not None:
            seq.cache = slot.kv
            kv.crop_to(seq.cache, seq.cached)
            seq.kv_ids = slot.ids[: seq.cached]
        else:
            seq.cache, seq.kv_ids, seq.cached = kv.new_cache(w.model.config), [], 0
        slot.kv, slot.ids = None, list(seq.kv_ids)
        seq.phase, seq.t_prefill_start = Phase.PREFILL, w.clock()

    def build_kv(self, ids: list[int]):
        """K/V of `ids` from scratch (used for the system prompt cache)."""
        cache = kv.new_cache(self.w.model.config)
        step = self.w.cfg.prefill_chunk
        for i in range(0, len(ids), step):
            self.w.model(input_ids=kv.as_batch(ids[i : i + step], self.w.device), past_key_values=cache, use_cache=True, logits_to_keep=1)
        return cache

    # ------------------------------------------------------------------ release

    def release(self, seq: Seq, cache, text: str) -> None:
        """The request ended normally (done, stopped, cancelled): record what the slot now holds."""
        slot, w = seq.slot, self.w
        if kv.agreed_len(cache) != len(seq.kv_ids):  # a step was cut short: never reuse such a KV
            log.error("Slot %d: KV (%d) and ids (%d) disagree after %s; dropping its cache",
                      slot.index, kv.agreed_len(cache), len(seq.kv_ids), seq.request_id)
            cache, seq.kv_ids = None, []
        if seq.spc_after and cache is not None and seq.kv_ids[: len(seq.spc_ids)] == seq.spc_ids:
            w.spc.put(seq.spc_ids, kv.clone_prefix(cache, len(seq.spc_ids)))
        if isinstance(seq.command, Generate) and not seq.generated:
            base = len(seq.target) - len(w.template.gen_prompt_ids)  # drop a half-fed reply prompt
            if len(seq.kv_ids) > base:
                kv.crop_to(cache, base)
                seq.kv_ids = seq.kv_ids[:base]
            seq.target = seq.target[:base]
        slot.kv, slot.ids, slot.request_id, slot.reserved = cache, seq.kv_ids, None, 0
        slot.last_used = w.clock()
        if seq.session is not None:
            session = seq.session
            session.busy = None
            close = w.template.close_after_reply(seq.generated) if seq.generated else []
            session.pending = (seq.target + seq.generated + close)[len(seq.kv_ids) :]
            if seq.generated:
                session.history.append(Message("assistant", text))
        elif w.cfg.cache_mode.imc:
            msgs, canon, bounds = seq.msgs, seq.canon, seq.bounds
            if seq.generated and bounds is not None:
                reply = Message("assistant", text)
                try:
                    # unchecked: the request that builds on this reply checks its whole conversation
                    canon = canon + w.template.encode_delta(msgs, [reply], verify=False).ids
                    msgs, bounds = msgs + (reply,), bounds + [len(canon)]
                except ValueError:
                    bounds = None
            slot.set_conversation(msgs, canon, bounds)
            if not slot.ids:  # nothing kept (stopped before any prefill, or a dropped KV)
                slot.clear()
        else:
            slot.clear()

    def abandon(self, seq: Seq) -> None:
        """The request failed: its slot's KV may be half-written, so drop it."""
        slot = seq.slot
        if slot is None or slot.request_id != seq.request_id:
            if slot is not None:
                slot.reserved = 0 if slot.request_id is None else slot.reserved
            if seq.session is not None:
                seq.session.busy = None
            return
        slot.request_id = None
        slot.clear()
        if seq.session is not None:
            seq.session.busy = None
            seq.session.pending = self.w.template.encode(seq.session.history).ids  # rebuild next time
