"""Issue 8, item 5: nothing slow on the scheduling loop. A long message is templated and tokenised
by the worker's tokenizer stage, beside the loop: a running reply keeps streaming meanwhile,
Stop never waits behind it, and a session's commands keep their order."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import defaultdict

import pytest
from worker_helpers import make_client

from desktop.protocol import (
    TERMINAL, AppendInput, Chat, ChunkEvent, CreateSession, Done, EndSession, ErrorEvent, Shutdown, Stop,
)
from desktop.model.chat_template import ChatTemplate
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.workers.config import WorkerConfig
from desktop.workers.tokenizer_stage import TokenizerStage
from desktop.workers.worker import Worker

pytestmark = pytest.mark.hardening

BIG = 900_000  # characters: allowed at the door (2 M), about a second of tokenising on this tokenizer


class Served:
    """A Worker run by `serve()` on a thread, as both hosts run it; events recorded with times."""

    def __init__(self, lm, **config) -> None:
        self.events: dict[str, list[tuple[float, object]]] = defaultdict(list)
        self.ended: dict[str, threading.Event] = defaultdict(threading.Event)
        self.worker = Worker(lm, WorkerConfig(**config), emit=self._emit)
        self.thread = threading.Thread(target=self.worker.serve, daemon=True)
        self.thread.start()

    def _emit(self, event) -> None:
        self.events[event.request_id].append((time.monotonic(), event))
        if isinstance(event, TERMINAL):
            self.ended[event.request_id].set()

    def end(self, rid: str, timeout: float = 30.0):
        assert self.ended[rid].wait(timeout), f"{rid} never ended"
        return self.events[rid][-1][1]

    def close(self) -> None:
        self.worker.submit(Shutdown())
        self.thread.join(10)


@pytest.fixture
def big_lm(tiny_lm):
    """The tiny model with a large context window, so that a long message passes the door."""
    return dataclasses.replace(tiny_lm, context_length=262_144, template=ChatTemplate(tiny_lm.tokenizer))


def long_message(tag: str) -> Message:
    return Message("user", (f"{tag} the quick brown fox jumps over the lazy dog; " * (BIG // 40))[:BIG])


def test_a_long_tokenisation_does_not_stall_a_running_reply(big_lm):
    started = time.perf_counter()
    ChatTemplate(big_lm.tokenizer).encode([long_message("probe")])
    tokenise_s = time.perf_counter() - started
    assert tokenise_s > 0.3, tokenise_s  # long enough to see a stall

    served = Served(big_lm, num_slots=2, kv_budget_bytes=8 << 20)
    try:
        served.worker.submit(Chat("a", (Message("user", "Tell me a long story."),), SamplingParams(max_tokens=4000, ignore_eos=True)))
        while len(served.events["a"]) < 20:
            time.sleep(0.005)
        t_big = time.monotonic()
        served.worker.submit(Chat("b", (long_message("big"),), SamplingParams(max_tokens=4)))
        big_end = served.end("b")
        t_end = time.monotonic()
        served.worker.submit(Stop("a"))
        assert isinstance(served.end("a"), Done)
    finally:
        served.close()
    assert isinstance(big_end, ErrorEvent) and big_end.code == "context_length_exceeded"  # refused after tokenising
    times = [t for t, e in served.events["a"] if isinstance(e, ChunkEvent) and t_big <= t <= t_end]
    gaps = [b - a for a, b in zip([t_big, *times], [*times, t_end])]
    assert len(times) > 10 and max(gaps) < max(0.25, tokenise_s / 3), (max(gaps), tokenise_s, len(times))


def test_stop_does_not_wait_behind_a_long_tokenisation(big_lm):
    served = Served(big_lm, num_slots=2, kv_budget_bytes=8 << 20)
    try:
        served.worker.submit(Chat("big1", (long_message("one"),), SamplingParams(max_tokens=4)))
        served.worker.submit(Chat("big2", (long_message("two"),), SamplingParams(max_tokens=4)))
        time.sleep(0.05)  # big1 is being tokenised, big2 waits behind it
        asked = time.monotonic()
        served.worker.submit(Stop("big2"))
        done = served.end("big2", timeout=5)
        took = served.events["big2"][-1][0] - asked
        served.end("big1")
    finally:
        served.close()
    assert isinstance(done, Done) and done.stats.finish_reason == "cancelled"
    assert took < 0.3, took


class SlowTemplate:
    """Stands in for the chat template: encoding a message containing "slow" takes 0.3 s."""

    def encode(self, msgs):
        if any("slow" in m.content for m in msgs):
            time.sleep(0.3)


def test_the_stage_keeps_order_where_it_matters():
    """Requests leave the stage in order; a Stop overtakes nothing it should not; a session's
    commands stay behind its command still being prepared; unrelated commands do not wait."""
    out: list[tuple[str, float]] = []
    stage = TokenizerStage(SlowTemplate(), lambda cmd, t, prepared: out.append((type(cmd).__name__ + ":" + cmd.request_id, time.monotonic())), 10**6)
    stage.start()
    user = lambda text: (Message("user", text),)  # noqa: E731
    t0 = time.monotonic()
    stage.submit(Chat("big", user("slow one"), SamplingParams()), 0.0)
    while stage._busy is None:  # the stage thread is preparing "big" (a sleep could lose the race on a busy box)
        time.sleep(0.001)
    t1 = time.monotonic()
    stage.submit(Chat("small", user("quick"), SamplingParams()), 0.0)
    stage.submit(CreateSession("c2", "s2", "slow system"), 0.0)
    stage.submit(AppendInput("a2", "s2", user("hi")), 0.0)  # behind its session's create
    stage.submit(EndSession("e1", "other"), 0.0)  # unrelated: at once
    stage.submit(Stop("small"), 0.0)  # small goes on first (unprepared), then the Stop, at once
    deadline = time.monotonic() + 5
    while len(out) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    order = [name for name, _ in out]
    assert order == ["EndSession:e1", "Chat:big", "Chat:small", "Stop:small", "CreateSession:c2", "AppendInput:a2"], order
    early = dict(out)
    assert early["Stop:small"] - t1 < 0.2 and early["EndSession:e1"] - t1 < 0.2  # did not wait for "big" (0.3 s)
    assert early["AppendInput:a2"] >= early["CreateSession:c2"] and early["CreateSession:c2"] - t0 >= 0.55
    assert stage.pending == 0


def test_shutdown_ends_what_the_stage_still_holds(big_lm):
    served = Served(big_lm, num_slots=2, kv_budget_bytes=8 << 20)
    served.worker.submit(Chat("big", (long_message("x"),), SamplingParams(max_tokens=4)))
    served.worker.submit(Chat("small", (Message("user", "hi"),), SamplingParams(max_tokens=4)))
    time.sleep(0.05)
    served.close()
    for rid in ("big", "small"):
        assert isinstance(served.end(rid, timeout=5), (Done, ErrorEvent))


def test_the_loop_uses_the_ids_the_stage_made(tiny_lm, oracle, monkeypatch):
    """The stage hands its ids forward with the command: the loop templates and tokenises a chat's
    messages no second time, on a miss and on a cached conversation alike (it still tokenises the
    reply it records), and the answers stay the uncached oracle's."""
    client = make_client(tiny_lm, num_slots=2)
    template, in_loop, again = tiny_lm.template, [False], []
    encode, encode_delta = template.encode, template.encode_delta

    def counted(msgs):
        if in_loop[0]:
            again.append(len(msgs))
        return encode(msgs)

    def counted_delta(history, delta, verify=True):
        if in_loop[0] and verify:
            again.append(len(delta))
        return encode_delta(history, delta, verify)

    monkeypatch.setattr(template, "encode", counted)
    monkeypatch.setattr(template, "encode_delta", counted_delta)

    def turn(rid: str, msgs: list[Message]) -> Done:
        client.submit(Chat(rid, tuple(msgs), SamplingParams(max_tokens=6)))  # not started: prepared here
        in_loop[0] = True
        try:
            done = list(client.stream(None, rid))[-1]
        finally:
            in_loop[0] = False
        assert isinstance(done, Done) and list(done.token_ids) == oracle.chat(msgs, 6), done
        return done

    conv = [Message("system", "You are terse."), Message("user", "Name a colour.")]
    first = turn("r1", conv)
    conv += [Message("assistant", first.text), Message("user", "And another one?")]
    second = turn("r2", conv)
    assert second.stats.kind in ("hit", "extend"), second.stats.kind  # the hash path, after a first turn that missed
    assert again == [], again
