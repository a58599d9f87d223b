"""Admission and release of requests (torch-free): pick the slot, keep the reusable KV, check the
context window and the memory budget; afterwards record what the slot or session now holds.
Every change to a slot's KV is queued as a KV op (kv_ops) for the runner, in order."""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from typing import Callable

from desktop.errors import BusyError, ContextOverflow, InvalidRequest
from desktop.model.chat_template import ChatTemplate
from desktop.model.messages import Message
from desktop.protocol import AppendInput, CacheReason, Chat, CreateSession, Generate, MatchKind
from desktop.workers.config import WorkerConfig
from desktop.workers.kv_ops import Clear, CopyPrefix, Crop, Fill, KvOp, Restore, Save
from desktop.workers.matcher import Matcher
from desktop.workers.sequence import Mark, Placement, Seq, Session
from desktop.workers.slots import Slot, SlotTable, common_prefix
from desktop.workers.spc import SystemPromptCache
from desktop.workers.tokenizer_stage import fit_view

log = logging.getLogger(__name__)


class Admission:
    def __init__(self, table: SlotTable, matcher: Matcher, spc: SystemPromptCache, sessions: dict[str, Session],
                 template: ChatTemplate, config: WorkerConfig, window: int, ops: deque[KvOp],
                 clock: Callable[[], float], spill: Callable[[Slot], bool] = lambda slot: False) -> None:
        """`spill(slot)`: save the slot's conversation to disk before its KV is cropped for another branch."""
        self.spill = spill
        self.table, self.matcher, self.spc, self.sessions = table, matcher, spc, sessions
        self.template, self.cfg, self.window, self.ops, self.clock = template, config, window, ops, clock

    # ------------------------------------------------------------------ start

    def place(self, seq: Seq) -> None:
        """Plan, check and claim: sets seq.placement and seq.num_kv. Raises OmnideskError leaving
        slots and sessions as they were (evictions aside: an evicted slot stays evicted)."""
        cmd = seq.command
        source: Slot | None = None
        if isinstance(cmd, Chat):
            if seq.encoded is None and cmd.overflow == "slide" and not cmd.raw:  # not prepared by the stage: its view here
                view = fit_view(self.template, seq.msgs, None, self.window, seq.params.max_tokens)
                seq.msgs, seq.encoded, seq.window_start = view.msgs, view.encoded, view.start
            plan = self.matcher.plan(seq.msgs, seq.encoded, cmd.raw, seq.warm)
            placement = Placement(plan.slot, plan.prompt, plan.reuse, plan.kind.value, seq.params.max_tokens > 0,
                                  plan.miss_reason, plan.canon, plan.bounds, plan.spc_ids,
                                  history=Matcher.history(seq.msgs, plan.bounds, plan.reuse), restore=plan.restore)
            source = plan.source
        elif isinstance(cmd, CreateSession):
            placement = self._plan_create(seq)
        elif isinstance(cmd, AppendInput):
            placement = self._plan_append(seq)
        else:
            placement = self._plan_generate(seq)
        if source is None:
            self._check(seq, placement)
        else:  # a branch: room for the copy beside its source (kept), else build in the source itself
            try:
                self._check(seq, placement, keep=source)
            except BusyError:
                placement, source = dataclasses.replace(placement, slot=source), None
                self._check(seq, placement)
            else:  # queued after the evictions the check made: the runner frees their rows first
                self.ops.append(CopyPrefix(source.index, placement.slot.index, placement.cached))
        self._claim(seq, placement, source is not None)

    def _plan_create(self, seq: Seq) -> Placement:
        slot = self.table.take_free()
        enc = seq.encoded if seq.encoded is not None else self.template.encode(seq.msgs)
        prompt = enc.ids if seq.msgs else []
        if prompt and self.cfg.cache_mode.spc:
            return Placement(slot, prompt, len(prompt), MatchKind.SPC.value, False, spc_ids=prompt)
        return Placement(slot, prompt, 0, MatchKind.MISS.value, False)

    def _plan_append(self, seq: Seq) -> Placement:
        ids, history = self._input_ids(seq)
        cached = common_prefix(seq.session.slot.ids, ids)
        kind = MatchKind.EXTEND if cached else MatchKind.MISS
        return Placement(seq.session.slot, ids, cached, kind.value, False, history=history)

    def _plan_generate(self, seq: Seq) -> Placement:
        gen = self.template.gen_prompt_ids
        ids, history = self._input_ids(seq)
        prompt = ids + gen
        cached = min(common_prefix(seq.session.slot.ids, ids), len(prompt) - 1)
        kind = MatchKind.HIT if len(prompt) - cached <= len(gen) else MatchKind.EXTEND
        return Placement(seq.session.slot, prompt, cached, (kind if cached else MatchKind.MISS).value, True,
                         history=history)

    def _input_ids(self, seq: Seq) -> tuple[list[int], int]:
        """The session's ids once the request's messages are in (in place of its draft, if they
        replace it), and its history: the ids before them that its KV holds (all of them after a
        failed turn, when it holds none). The KV keeps the common prefix; only the rest is prefilled."""
        session, at = seq.session, _input_at(seq)
        ids = (session.slot.ids + session.pending)[: at.ids]
        if seq.msgs:
            try:
                ids += self.template.encode_delta(session.history[: at.messages], seq.msgs).ids
            except ValueError:
                raise InvalidRequest("This model's chat template cannot be extended message by message; use plain chat.") from None
        seq.window_start = session.window_start
        # the reply's room: a Generate's max_tokens (at most a quarter window); an input alone, none
        reply = min(max(seq.params.max_tokens, 0), self.window // 4) if isinstance(seq.command, Generate) and seq.params else 0
        if len(ids) + len(self.template.gen_prompt_ids) + reply > self.window:
            slid = self._slide(seq, at, reply)
            if slid is not None:
                return slid
        return ids, min(len(session.slot.ids), at.ids) or at.ids

    def _slide(self, seq: Seq, at: Mark, reply: int) -> tuple[list[int], int] | None:
        """A session past the window (a long call): its view by the chats' rule (workers/slide.py,
        with room for `reply` tokens) over all its messages, so a call never ends for length. The
        KV keeps the system prompt; the rest of the view is prefilled again. None where the rule
        moves the view no further than it is."""
        session = seq.session
        msgs = tuple(session.history[: at.messages]) + tuple(seq.msgs)
        view = fit_view(self.template, msgs, None, self.window, reply)
        if view.start <= session.window_start:
            return None
        before = view.msgs[: len(view.msgs) - len(seq.msgs)]
        before_ids = self.template.encode(before).ids if before else []
        if session.reply_at is not None and at.messages == len(session.history) and session.history[-1].role == "assistant":
            session.reply_at = len(self.template.encode(before[:-1]).ids) if len(before) > 1 else None
        session.window_start = seq.window_start = view.start
        seq.slid, seq.view_at = True, Mark(at.messages, len(before_ids))
        return view.encoded.ids, len(before_ids)

    def _check(self, seq: Seq, p: Placement, keep: Slot | None = None) -> None:
        ctx = self.window
        if len(p.prompt) > (ctx - 1 if p.generate else ctx):
            cmd = seq.command
            if isinstance(cmd, CreateSession) or (isinstance(cmd, Chat) and cmd.overflow == "error"):
                raise ContextOverflow(
                    f"This conversation is {len(p.prompt)} tokens long; the model's context window is {ctx} "
                    "tokens. Start a new conversation or shorten the message."
                )
            raise ContextOverflow(  # sliding: even the system prompt and the last message alone do not fit
                f"The last message is too long for the model: with the earlier messages left out, what is left is "
                f"{len(p.prompt)} tokens long; the model's context window is {ctx} tokens. Shorten it or send it in parts."
            )
        max_new = min(seq.params.max_tokens, ctx - len(p.prompt)) if p.generate else 0
        self.table.reserve(p.slot, len(p.prompt) + max_new, keep)

    def _claim(self, seq: Seq, p: Placement, copied: bool) -> None:
        slot, ops = p.slot, self.ops
        if isinstance(seq.command, CreateSession):
            session = Session(seq.command.session_id, slot, list(seq.msgs), busy=seq.request_id)
            self.sessions[session.session_id] = session
            slot.session_id, seq.session = session.session_id, session
        elif isinstance(seq.command, (AppendInput, Generate)):
            self._take_input(seq)
        slot.request_id = seq.request_id
        slot.origin = getattr(seq.command, "origin", "app")  # who asked weighs what its KV is worth keeping
        i = slot.index
        if copied:
            pass  # the branch's prefix was copied in during planning
        elif p.restore is not None:  # read back from disk into this empty slot
            ops.append(Restore(p.restore, i, room=len(p.prompt)))
        elif p.spc_ids and self.spc.has(p.spc_ids):
            ops.append(Restore(self.spc.get(p.spc_ids), i, room=len(p.prompt)))
        elif p.spc_ids and len(p.spc_ids) <= self.cfg.prefill_chunk:  # a build is one forward at most
            ops.extend([Clear(i), Fill(i, tuple(p.spc_ids), self.cfg.prefill_chunk), Save(i, tuple(p.spc_ids))])
        elif p.spc_ids:  # building it here would stall every running reply: prefill it in chunks
            ops.append(Clear(i))
            p = dataclasses.replace(p, cached=0, kind=MatchKind.MISS.value, spc_after=True)
        elif p.cached and slot.ids:
            if p.cached < len(slot.ids):  # the branch cropped away leaves RAM: to disk first
                self.spill(slot)
            self.table.retire(slot, p.cached)  # the messages cropped away were another branch's
            ops.append(Crop(i, p.cached))
        else:
            ops.append(Clear(i))
            p = dataclasses.replace(p, cached=0)
        p = dataclasses.replace(p, miss_reason=_reason(seq, p), restore=None)  # the runner holds the copy now
        seq.placement, seq.num_kv, seq.t_admitted = p, p.cached, self.clock()
        seq.encoded = None  # its ids live in the placement now
        slot.ids = p.prompt[: p.cached]
        slot.conversation = cmd.conversation if isinstance(cmd := seq.command, Chat) else ""  # names its snapshot

    @staticmethod
    def _take_input(seq: Seq) -> None:
        """The session's messages take the request's (in place of a draft they replace); a draft
        appended is marked as such, anything else makes the session's messages final."""
        session, cmd, at = seq.session, seq.command, seq.view_at or _input_at(seq)
        finalised = session.draft is not None and isinstance(cmd, Generate) and not seq.msgs
        del session.history[at.messages :]
        session.history += seq.msgs
        draft = bool(isinstance(cmd, AppendInput) and cmd.draft and seq.msgs)
        session.draft = at if draft else None
        if (seq.msgs and not draft) or finalised:
            session.reply_at = None  # the reply is no longer the last message (a draft keeps it: it may go)

    # ------------------------------------------------------------------ release

    def release(self, seq: Seq, kv_len: int, text: str) -> None:
        """The request ended normally (done, stopped, cancelled): record what the slot now holds.
        `kv_len` is what the runner reports for the slot's KV (a forward cut short: unreliable)."""
        slot, p, ops = seq.slot, seq.placement, self.ops
        num_kv = seq.num_kv
        if kv_len != num_kv:  # a step was cut short: never reuse such a KV
            log.error("Slot %d: KV (%d) and ids (%d) disagree after %s; dropping its cache",
                      slot.index, kv_len, num_kv, seq.request_id)
            ops.append(Clear(slot.index))
            num_kv = 0
        kv_ids, prompt = seq.ids[:num_kv], p.prompt
        if p.spc_after and num_kv >= len(p.spc_ids):
            ops.append(Save(slot.index, tuple(p.spc_ids)))
        if isinstance(seq.command, Generate) and not seq.generated:
            base = len(prompt) - len(self.template.gen_prompt_ids)  # drop a half-fed reply prompt
            if num_kv > base:
                ops.append(Crop(slot.index, base))
                kv_ids = kv_ids[:base]
            prompt = prompt[:base]
        slot.ids, slot.request_id, slot.reserved = kv_ids, None, 0
        slot.last_used = self.clock()
        if seq.session is not None:
            session = seq.session
            session.busy = None
            close = self.template.close_after_reply(seq.generated) if seq.generated else []
            session.pending = (prompt + seq.generated + close)[len(kv_ids) :]
            if seq.generated:
                session.history.append(Message("assistant", text))
                session.reply_at = len(prompt) - len(self.template.gen_prompt_ids)
        elif self.cfg.cache_mode.imc:
            self._remember(seq, slot, text)
        else:
            self.clear(slot)

    def _remember(self, seq: Seq, slot: Slot, text: str) -> None:
        """Record which messages a stateless request's slot now holds (its reply included: its
        canonical ids are the ids generated where they spell its text, ChatTemplate.encode_reply)."""
        msgs, canon, bounds = seq.msgs, seq.placement.canon, seq.placement.bounds
        if seq.generated and bounds is not None:
            reply = Message("assistant", text)
            try:
                # unchecked: the request that builds on this reply checks its whole conversation
                canon = canon + self.template.encode_reply(msgs, reply, seq.generated)
                msgs, bounds = msgs + (reply,), bounds + [len(canon)]
            except ValueError:
                bounds = None
        slot.set_conversation(msgs, canon, bounds)
        if not slot.ids:  # nothing kept (stopped before any prefill, or a dropped KV)
            self.clear(slot)

    def abandon(self, seq: Seq) -> None:
        """The placed request failed: its slot's KV may be half-written, so drop it."""
        slot = seq.slot
        if slot is None or slot.request_id != seq.request_id:
            if seq.session is not None:
                seq.session.busy = None
            return
        slot.request_id = None
        self.clear(slot)
        if seq.session is not None:
            session = seq.session
            session.busy = None
            if session.draft is not None:  # a failed draft is withdrawn: the final words come anyway
                del session.history[session.draft.messages :]
                session.draft = None
            system = [m for m in session.history[:1] if m.role == "system"]
            view = system + session.history[session.window_start:] if session.window_start else session.history
            session.pending = self.template.encode(view).ids  # rebuild next time (its view, if it slid)
            session.reply_at = None

    def truncate_reply(self, session: Session, text: str) -> None:
        """The session's last message, its generated reply, becomes `text` ("" drops it): its ids
        become the canonical ids of the new text, and the KV is cropped to what still agrees."""
        if session.busy is not None:
            raise InvalidRequest("This session is still busy with another request; stop it and wait for its end first.")
        if session.draft is not None:
            raise InvalidRequest("Nothing to truncate: the session's last message is a draft of the user's words.")
        if session.reply_at is None or not session.history or session.history[-1].role != "assistant":
            raise InvalidRequest("Nothing to truncate: the session's last message is not a reply it generated.")
        slot, before = session.slot, session.history[:-1]
        ids = (slot.ids + session.pending)[: session.reply_at]
        if text:
            reply = Message("assistant", text)
            try:
                ids += self.template.encode_delta(before, [reply]).ids
            except ValueError:
                raise InvalidRequest("This model's chat template cannot be extended message by message.") from None
            session.history[-1] = reply
        else:
            session.history.pop()
            session.reply_at = None
        keep = common_prefix(slot.ids, ids)
        if keep < len(slot.ids):
            self.ops.append(Crop(slot.index, keep))
            slot.ids = slot.ids[:keep]
        session.pending = ids[keep:]

    def clear(self, slot: Slot) -> None:
        """Empty the slot's bookkeeping and its KV."""
        slot.clear()
        self.ops.append(Clear(slot.index))


def _input_at(seq: Seq) -> Mark:
    """Where a session request's messages go: at the start of the session's draft if they
    replace it (an AppendInput, draft or not, or a Generate that brings the final words), else
    at the end (a Generate alone makes a draft final)."""
    session, cmd = seq.session, seq.command
    if session.draft is not None and (isinstance(cmd, AppendInput) or seq.msgs):
        return session.draft
    return Mark(len(session.history), len(session.slot.ids) + len(session.pending))


def _reason(seq: Seq, p: Placement) -> str:
    """The one true reason (protocol/reasons.py) for what the placed request reuses: the
    matcher's reason why the history is not all cached ("" when it is), settled for the cases
    only admission sees (nothing before the new input; a session rebuilt)."""
    if p.history == 0:  # nothing before the new input: a new conversation or session
        return CacheReason.NEW.value
    if seq.session is not None and not p.cached:  # a failed turn dropped the session's KV
        return CacheReason.REBUILT.value
    return p.miss_reason or CacheReason.CACHED.value
