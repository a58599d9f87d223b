"""The scheduler without a model: a fake runner that keeps each slot's ids as its "KV" and a
tokenizer-free template. Admission order, slot matching, eviction, budgets, chunking, stop in
every phase, sessions and reset — each in milliseconds, the KV ops it asks for checked."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest

from desktop.errors import BusyError, ContextOverflow, InvalidRequest, UnknownSession
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import AppendInput, Chat, CreateSession, Generate
from desktop.workers.config import WorkerConfig
from desktop.workers.kv_ops import Clear, CopyPrefix, Crop, Fill, Restore, Save, apply
from desktop.workers.scheduler import Scheduler
from desktop.workers.sequence import Phase, Seq

END, GEN = 1, [7, 8]  # a message's closing id; the reply prompt (also how an assistant message starts)
ROLE = {"system": [5], "user": [6], "assistant": GEN}


def tok(text: str) -> list[int]:
    return [100 + ord(c) % 500 for c in text]


@dataclass
class Enc:
    ids: list[int]
    bounds: list[int]


class StubTemplate:
    """Each message is its role id(s), one id per character, then END; append-only by design."""

    gen_prompt_ids = GEN
    eos_ids = frozenset({2})

    def encode(self, msgs) -> Enc:
        ids, bounds = [], []
        for m in msgs:
            ids += ROLE[m.role] + tok(m.content) + [END]
            bounds.append(len(ids))
        return Enc(ids, bounds)

    def encode_delta(self, history, delta, verify: bool = True) -> Enc:
        return self.encode(delta)

    def encode_reply(self, history, reply, generated) -> list[int]:
        return self.encode_delta(history, [reply]).ids  # the reply's text, never its generated ids

    def close_after_reply(self, generated) -> list[int]:
        return [END]


class FakeRunner:
    """A slot's KV is the list of ids fed to it; every operation is logged."""

    def __init__(self, num_slots: int) -> None:
        self.kv: list[list[int]] = [[] for _ in range(num_slots)]
        self.log: list[object] = []

    def kv_len(self, slot: int) -> int:
        return len(self.kv[slot])

    def prefill(self, slot: int, ids, sample=None):
        self.kv[slot] += list(ids)

    def crop(self, slot: int, n: int) -> None:
        del self.kv[slot][n:]

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        self.kv[dst] = self.kv[src][:n]

    def clear(self, slot: int) -> None:
        self.kv[slot] = []

    def export_prefix(self, slot: int, n: int):
        return tuple(self.kv[slot][:n])

    def import_prefix(self, saved, slot: int, room: int = 0) -> None:
        self.kv[slot] = list(saved)

    def saved_nbytes(self, saved) -> int:
        return len(saved)


class Rig:
    """The worker loop's part, minimal: apply ops, run chunks and steps, reply with scripted text."""

    def __init__(self, window: int = 1000, **config) -> None:
        self.now = 0.0
        self.cfg = WorkerConfig(**config)
        self.window = window
        self.s = Scheduler(self.cfg, StubTemplate(), window, 1, self.clock)
        self.runner = FakeRunner(self.s.cfg.num_slots)
        self.ended: dict[str, str] = {}  # request id → finish reason or error code
        self.replies: dict[str, str] = {}

    def clock(self) -> float:
        self.now += 1.0
        return self.now

    def sync(self) -> list[object]:
        ops = list(self.s.ops)
        while self.s.ops:
            apply(self.s.ops.popleft(), self.runner, self.s.spc.put)
        self.runner.log += ops
        return ops

    def chat(self, rid: str, msgs, max_tokens: int = 4, reply: str = "okay") -> Seq:
        params = SamplingParams(max_tokens=max_tokens)
        return self.add(Seq(rid, Chat(rid, tuple(msgs), params), self.clock(), self.window, params, tuple(msgs)), reply)

    def add(self, seq: Seq, reply: str = "okay") -> Seq:
        self.replies[seq.request_id] = reply
        self.s.add(seq)
        return seq

    def finish(self, seq: Seq, reason: str) -> None:
        self.s.finish(seq, self.runner.kv_len(seq.slot.index), "".join(chr(t - 100) for t in seq.generated))
        self.sync()
        self.ended[seq.request_id] = reason

    def take(self, seq: Seq) -> None:
        seq.generated.append(tok(self.replies[seq.request_id])[len(seq.generated)])
        if len(seq.generated) >= seq.max_new:
            self.finish(seq, "length")
        elif seq.phase is Phase.DECODE and seq in self.s.prefilling:
            self.s.start_decoding(seq)

    def tick(self) -> None:
        while (seq := self.s.next_waiting()) is not None:
            try:
                done = self.s.admit(seq)
            except (BusyError, ContextOverflow) as exc:
                self.s.fail(seq)
                self.ended[seq.request_id] = exc.code
                continue
            finally:
                self.sync()
            if done:
                self.finish(seq, "prefilled")
        plan = self.s.schedule_prefill()
        for seq in plan.cancelled:
            self.finish(seq, "cancelled")
        for seq, n in plan.chunks:
            self.runner.prefill(seq.slot.index, seq.prompt[seq.num_kv : seq.num_kv + n])
            self.s.prefilled(seq, n)
            if not seq.to_prefill:
                self.take(seq) if seq.generate else self.finish(seq, "prefilled")
        decode = self.s.schedule_decode()
        for seq in decode.stopped:
            self.finish(seq, "stopped")
        for seq in decode.batch:
            self.runner.prefill(seq.slot.index, [seq.generated[-1]])
        self.s.decoded(decode.batch)
        for seq in decode.batch:
            self.take(seq)
        self.check()

    def run(self, *seqs: Seq) -> list[Seq]:
        for _ in range(200):
            if all(s.request_id in self.ended for s in seqs):
                return list(seqs)
            self.tick()
        raise AssertionError("never ended")

    def check(self) -> None:
        active = self.s.active()
        self.s.table.check_integrity(self.runner.kv_len, {s.request_id for s in active})
        for seq in active:
            assert self.runner.kv[seq.slot.index] == seq.kv_ids
        for slot in self.s.table.slots:
            if slot.request_id is None:
                assert self.runner.kv[slot.index] == slot.ids


S = Message("system", "be brief")


def U(text: str) -> Message:
    return Message("user", text)


def A(text: str) -> Message:
    return Message("assistant", text)


def test_the_scheduler_imports_without_torch():
    code = "import sys; sys.modules['torch'] = None; import desktop.workers.scheduler, desktop.workers.commands"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_admission_is_first_come_first_served_up_to_max_running():
    rig = Rig(num_slots=3, max_running=2)
    a, b, c = (rig.chat(r, [U(r * 3)]) for r in "abc")
    rig.tick()
    assert [s.phase for s in (a, b, c)] == [Phase.DECODE, Phase.DECODE, Phase.WAITING]
    rig.run(a, b)
    assert c.phase is Phase.WAITING  # the tick that ended them admitted before they left
    rig.tick()
    assert c.phase is not Phase.WAITING
    rig.run(c)
    assert [rig.ended[r] for r in "abc"] == ["length"] * 3


def test_matching_miss_hit_extend_and_a_branch_copied_into_an_empty_slot():
    rig = Rig(num_slots=2, cache_mode="imc", cache_min_tokens=4)
    first = rig.run(rig.chat("a", [S, U("hello")]))[0]
    assert (first.placement.kind, first.cached) == ("miss", 0)
    again = rig.run(rig.chat("b", [S, U("hello")]))[0]  # regenerate
    assert again.placement.kind == "hit" and again.num_prompt - again.cached == 1
    conv = [S, U("hello"), A("okay"), U("more")]
    follow = rig.run(rig.chat("c", conv))[0]
    assert (follow.placement.kind, follow.slot) == ("extend", first.slot)
    assert follow.cached == first.num_prompt + 3  # prompt + the generated ids in the KV (all but the last)
    rig.runner.log.clear()
    edit = rig.run(rig.chat("d", [S, U("hello"), A("okay"), U("less")]))[0]
    assert (edit.placement.kind, edit.placement.miss_reason) == ("prefix", "edited")
    assert edit.slot is not first.slot  # the branch went to the empty slot, the original stays whole
    assert CopyPrefix(first.slot.index, edit.slot.index, edit.cached) in rig.runner.log
    assert first.slot.ids[: follow.num_prompt] == follow.prompt  # the original conversation is whole


def test_a_system_prompt_is_built_once_then_restored():
    rig = Rig(num_slots=3, cache_mode="spc")
    one = rig.run(rig.chat("a", [S, U("one")]))[0]
    n_system = len(StubTemplate().encode([S]).ids)
    assert (one.placement.kind, one.cached) == ("spc", n_system)
    assert any(isinstance(op, Fill) for op in rig.runner.log) and any(isinstance(op, Save) for op in rig.runner.log)
    rig.runner.log.clear()
    two = rig.run(rig.chat("b", [S, U("two")]))[0]
    assert (two.placement.kind, two.cached) == ("spc", n_system) and rig.s.spc.builds == 1
    assert [type(op) for op in rig.runner.log if not isinstance(op, Clear)][:1] == [Restore]


def test_a_long_system_prompt_is_prefilled_by_its_first_request_then_kept():
    rig = Rig(num_slots=2, cache_mode="spc", prefill_chunk=4, prefill_budget=4)
    system = Message("system", "x" * 20)
    first = rig.run(rig.chat("a", [system, U("hi")]))[0]
    assert (first.placement.kind, first.cached) == ("miss", 0) and not any(isinstance(op, Fill) for op in rig.runner.log)
    second = rig.run(rig.chat("b", [system, U("yo")]))[0]
    assert (second.placement.kind, second.cached) == ("spc", 22) and rig.s.spc.builds == 1


def test_lru_eviction_clears_the_oldest_slot_and_remembers_why():
    rig = Rig(num_slots=2, cache_mode="imc")
    a = rig.run(rig.chat("a", [U("conversation a")]))[0]
    b = rig.run(rig.chat("b", [U("conversation b")]))[0]
    rig.runner.log.clear()
    c = rig.run(rig.chat("c", [U("conversation c")]))[0]
    assert c.slot is a.slot and Clear(a.slot.index) in rig.runner.log
    back = rig.run(rig.chat("a2", [U("conversation a"), A("okay"), U("more")]))[0]
    assert (back.placement.kind, back.placement.miss_reason) == ("miss", "evicted")
    assert back.slot is b.slot


def test_the_kv_budget_evicts_idle_slots_and_refuses_what_never_fits():
    rig = Rig(num_slots=3, cache_mode="imc", kv_budget_bytes=1 << 20)
    rig.s.table.budget_bytes = 40  # tokens: one byte each
    a = rig.run(rig.chat("a", [U("a" * 15)]))[0]
    b = rig.run(rig.chat("b", [U("b" * 15)]))[0]  # a (20) + b (20) would pass 40 with b's reservation
    assert rig.s.table.used_bytes() <= 40 and not a.slot.ids and b.slot.ids
    rig.run(rig.chat("c", [U("c" * 60)]))
    assert rig.ended["c"] == "context_length_exceeded"
    assert b.slot.ids and b.slot.request_id is None  # nothing was lost for the refusal


def test_a_prompt_past_the_context_window_is_refused_with_nothing_claimed():
    rig = Rig(window=30, num_slots=1)
    rig.run(rig.chat("a", [U("x" * 40)]))
    assert rig.ended["a"] == "context_length_exceeded"
    assert all(s.request_id is None and s.reserved == 0 for s in rig.s.table.slots)
    ok = rig.run(rig.chat("b", [U("x" * 10)], max_tokens=50, reply="y" * 50))[0]
    assert rig.ended["b"] == "length" and len(ok.generated) == ok.max_new == 30 - ok.num_prompt


def test_prefill_chunks_share_the_budget_first_come_first_served():
    rig = Rig(num_slots=3, prefill_chunk=4, prefill_budget=6)
    a, b, c = rig.chat("a", [U("a" * 10)]), rig.chat("b", [U("b" * 10)]), rig.chat("c", [U("c" * 10)])
    while (seq := rig.s.next_waiting()) is not None:
        rig.s.admit(seq)
        rig.sync()
    plan = rig.s.schedule_prefill()
    assert [(s.request_id, n) for s, n in plan.chunks] == [("a", 4), ("b", 2)]
    rig.run(a, b, c)
    assert all(s.num_kv == s.num_prompt + len(s.generated) - 1 for s in (a, b, c))


def test_stop_in_each_phase():
    rig = Rig(num_slots=1, prefill_chunk=2, prefill_budget=2)
    running = rig.chat("r", [U("abc")], max_tokens=50)
    queued = rig.chat("q", [U("def")])
    rig.tick()
    assert rig.s.stop("q") is queued and queued.phase is Phase.WAITING and queued not in rig.s.waiting
    assert running.phase is Phase.PREFILL and rig.s.stop("r") is running
    rig.tick()
    assert rig.ended["r"] == "cancelled" and running.slot.ids == running.kv_ids  # the prefilled part is kept
    rig.check()
    decoding = rig.chat("d", [U("abc")], max_tokens=50, reply="x" * 50)
    for _ in range(20):
        rig.tick()
    assert decoding.phase is Phase.DECODE and rig.s.stop("d") is decoding
    rig.tick()
    assert rig.ended["d"] == "stopped" and decoding.slot.ids == decoding.kv_ids == decoding.ids[:-1]
    assert rig.s.stop("nothing") is None


def test_a_kv_that_disagrees_at_the_end_is_dropped():
    rig = Rig(num_slots=1)
    seq = rig.chat("a", [U("abc")], max_tokens=50, reply="x" * 50)
    rig.tick()
    rig.tick()
    rig.runner.kv[seq.slot.index].append(99)  # a forward cut short after the KV grew
    rig.s.stop("a")
    rig.tick()
    assert rig.ended["a"] == "stopped" and seq.slot.ids == [] and rig.runner.kv[seq.slot.index] == []


def session_cmd(rig: Rig, cmd, msgs=(), params=None) -> Seq:
    seq = Seq(cmd.request_id, cmd, rig.clock(), rig.window, params, tuple(msgs))
    if not isinstance(cmd, CreateSession):
        seq.session = rig.s.sessions[cmd.session_id]
        seq.session.busy = seq.request_id
    return rig.add(seq)


def test_a_session_grows_append_only_and_ends_empty():
    rig = Rig(num_slots=2)
    create = rig.run(session_cmd(rig, CreateSession("c", "s", "be brief"), [S]))[0]
    assert rig.ended["c"] == "prefilled" and create.placement.kind == "spc"
    slot = rig.s.sessions["s"].slot
    rig.run(session_cmd(rig, AppendInput("a", "s", (U("hi"),)), [U("hi")]))
    before = list(slot.ids)
    gen = rig.run(session_cmd(rig, Generate("g", "s"), params=SamplingParams(max_tokens=3)))[0]
    assert gen.prompt[: len(before)] == before and gen.cached == len(before) and gen.placement.kind == "hit"
    assert rig.s.sessions["s"].pending == [tok("oka")[-1], END]  # the last token and the close, not in the KV yet
    session, seqs = rig.s.end_session("s")
    rig.s.close_session(session)
    rig.sync()
    assert not seqs and slot.session_id is None and slot.ids == [] and rig.runner.kv[slot.index] == []


def test_truncating_a_reply_keeps_the_kv_that_still_agrees():
    """A barge-in: the session's last reply becomes what was heard; the KV keeps its prefix up to
    where the new text differs, the rest waits as pending ids. Refused while busy, when the last
    message is not a reply, or for an unknown session."""
    rig = Rig(num_slots=2)
    rig.run(session_cmd(rig, CreateSession("c", "s", None), []))
    rig.run(session_cmd(rig, AppendInput("a", "s", (U("hi"),)), [U("hi")]))
    session = rig.s.sessions["s"]
    with pytest.raises(InvalidRequest, match="not a reply"):
        rig.s.truncate_reply("s", "ok")
    before = list(session.slot.ids)
    rig.run(session_cmd(rig, Generate("g", "s"), params=SamplingParams(max_tokens=3)))  # replies "oka"
    rig.s.truncate_reply("s", "ox")
    rig.sync()
    want = before + GEN + tok("ox") + [END]
    assert session.slot.ids + session.pending == want and session.history[-1] == A("ox")
    assert rig.runner.kv[session.slot.index] == session.slot.ids == before + GEN + tok("o")  # "k" differed
    rig.s.truncate_reply("s", "")
    rig.sync()
    assert session.slot.ids + session.pending == before and session.history == [U("hi")]
    with pytest.raises(InvalidRequest, match="not a reply"):
        rig.s.truncate_reply("s", "again")
    session.busy = "x"
    with pytest.raises(InvalidRequest, match="busy"):
        rig.s.truncate_reply("s", "")
    with pytest.raises(UnknownSession):
        rig.s.truncate_reply("nope", "")


def test_reset_empties_every_slot_and_session():
    rig = Rig(num_slots=2)
    rig.run(session_cmd(rig, CreateSession("c", "s", "be brief"), [S]))
    rig.run(rig.chat("a", [U("hello")]))
    rig.s.reset()
    rig.sync()
    assert not rig.s.sessions and all(not s.ids and s.session_id is None for s in rig.s.table.slots)
    assert rig.runner.kv == [[], []]
