"""Issue 8, item 4: Ctrl-C during a reply, then continue. The terminal chat drives the worker on
its own thread, so Python delivered KeyboardInterrupt inside a step (between two layers of a
forward): the KV and the ids ended one token apart and the next turn failed with a size error."""

from __future__ import annotations

import builtins
import os
import signal

import pytest
from worker_helpers import CtrlC, make_client

from desktop.protocol import Chat, ChunkEvent, Done, ErrorEvent, Stop
from desktop.model import kv
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.workers.runner.hf import HFRunner
from desktop.workers.slots import SlotTable

pytestmark = pytest.mark.hardening

LIMIT = 24


@pytest.fixture
def ctrl_c(tiny_lm):
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    c = CtrlC(tiny_lm)
    yield c
    c.close()


def interrupted_turn(client, rid: str, msgs, ctrl_c: CtrlC, nth_forward: int) -> tuple[Done | ErrorEvent, str]:
    """One turn as the terminal chat runs it: Ctrl-C (on the n-th forward) stops the reply."""
    ctrl_c.arm(nth_forward)
    stream = client.stream(Chat(rid, tuple(msgs), SamplingParams(max_tokens=LIMIT)))
    streamed, end = "", None
    while end is None:
        try:
            for event in stream:
                if isinstance(event, ChunkEvent):
                    streamed += event.text_delta
                elif isinstance(event, (Done, ErrorEvent)):
                    end = event
        except KeyboardInterrupt:
            client.submit(Stop(rid))
            stream = client.stream(None, rid)
    ctrl_c.arm(0)
    return end, streamed


@pytest.mark.parametrize("runner", ["hf", "static"])
@pytest.mark.parametrize("nth_forward", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("send_back", ["done", "streamed", "stripped"])
def test_ctrl_c_mid_forward_then_continue(tiny_lm, oracle, ctrl_c, nth_forward, send_back, runner):
    client = make_client(tiny_lm, num_slots=2, prefill_chunk=16, prefill_budget=24, runner=runner)  # integrity after each step
    conv = [Message("system", "You are a helpful assistant."), Message("user", "Tell me about the fox.")]
    first, streamed = interrupted_turn(client, "r1", conv, ctrl_c, nth_forward)
    assert isinstance(first, Done), first
    assert list(first.token_ids) == oracle.chat(conv, LIMIT)[: len(first.token_ids)]
    reply = {"done": first.text, "streamed": streamed, "stripped": first.text.strip()}[send_back]
    conv += [Message("assistant", reply), Message("user", "And then?")]
    for n in range(2):  # today the first of these failed, the second recomputed everything
        done, _ = interrupted_turn(client, f"r{n + 2}", conv, ctrl_c, 0)
        assert isinstance(done, Done), done
        assert list(done.token_ids) == oracle.chat(conv, LIMIT)
        assert done.stats.cached_tokens > 0, done.stats  # the stopped reply's KV was kept and reused
        conv += [Message("assistant", done.text), Message("user", "More.")]


def test_terminal_chat_recovers_after_ctrl_c(tiny_lm, ctrl_c, monkeypatch, capsys):
    """The terminal chat itself: Ctrl-C in the middle of a forward, then two more messages."""
    from desktop import cli

    lines = iter(["Tell me about the fox.", "And then?", "More."])
    arms = iter([4, 0, 0])

    def fake_input(prompt: str = "") -> str:
        try:
            line = next(lines)
        except StopIteration:
            raise EOFError from None
        ctrl_c.arm(next(arms))
        return line

    monkeypatch.setattr(builtins, "input", fake_input)
    monkeypatch.setattr("desktop.model.loader.load_model", lambda spec, progress=None, **kw: tiny_lm)  # the hooked model
    assert cli._chat(cli.parse_args(["chat", "--model", "tiny", "--max-tokens", "40", "--threads", "1"])) == 0
    err = capsys.readouterr().err
    assert "error" not in err.lower(), err
    assert err.count("stopped") == 1 and err.count("[cached") == 3, err


def test_integrity_check_sees_layers_one_apart(tiny_lm):
    """A forward cut between two layers leaves layer 0 one longer: the slot check must say so."""
    runner = HFRunner(tiny_lm.model, 1, tiny_lm.kv_bytes_per_token)
    runner.prefill(0, [5, 6, 7])
    layer = runner.caches[0].layers[0]
    layer.keys, layer.values = layer.keys[:, :, :2], layer.values[:, :, :2]
    assert kv.cache_len(runner.caches[0]) == 2 and runner.kv_len(0) == -1
    table = SlotTable(1, 1, 10**9)
    table.slots[0].ids = [5, 6]
    with pytest.raises(AssertionError, match="layers disagree"):
        table.check_integrity(runner.kv_len, set())


@pytest.mark.parametrize("runner", ["hf", "static"])
def test_a_cut_short_step_costs_a_recompute_not_a_failure(tiny_lm, oracle, ctrl_c, runner):
    """Defence behind the fix: a step interrupted anyway (the worker stepped directly, with no
    Ctrl-C shield). transformers' cache is left with layers that disagree: the worker drops it when
    the reply ends, so the next turn rebuilds instead of failing. The static runner writes only
    past a row's length, so its KV stays valid and is kept."""
    client = make_client(tiny_lm, num_slots=1, runner=runner)
    w = client.worker
    conv = [Message("user", "Tell me about the fox.")]
    w.submit(Chat("c1", tuple(conv), SamplingParams(max_tokens=LIMIT)))
    ctrl_c.arm(6)
    with pytest.raises(KeyboardInterrupt):
        while w.step():
            pass
    w.submit(Stop("c1"))
    while w.step():
        pass
    first = client.events.pop("c1")[-1]
    assert isinstance(first, Done) and w.runner.kv_len(0) == len(w.scheduler.table.slots[0].ids)
    assert (w.scheduler.table.slots[0].ids == []) == (runner == "hf"), w.scheduler.table.slots[0].ids
    conv += [Message("assistant", first.text), Message("user", "And then?")]
    done = client.run(Chat("c2", tuple(conv), SamplingParams(max_tokens=LIMIT)))[-1]
    assert isinstance(done, Done) and list(done.token_ids) == oracle.chat(conv, LIMIT)


def test_ctrl_c_while_the_message_is_tokenised(tiny_lm, oracle, monkeypatch):
    """Submitting tokenises the message (the tokenizer stage runs inline when the worker is
    stepped directly): Ctrl-C there lets the request in whole, then stops it cleanly."""
    client = make_client(tiny_lm, num_slots=2)
    encode = tiny_lm.template.control.encode
    fired = []

    def interrupted_encode(text: str) -> list[int]:
        if not fired:
            fired.append(True)
            os.kill(os.getpid(), signal.SIGINT)
        return encode(text)

    monkeypatch.setattr(tiny_lm.template.control, "encode", interrupted_encode)
    conv = [Message("user", "A question never asked before, about a red balloon.")]
    stream = client.stream(Chat("t1", tuple(conv), SamplingParams(max_tokens=LIMIT)))
    with pytest.raises(KeyboardInterrupt):
        next(stream)
    assert fired
    client.submit(Stop("t1"))
    first = list(client.stream(None, "t1"))[-1]
    assert isinstance(first, Done) and first.stats.finish_reason == "cancelled", first
    monkeypatch.undo()
    done = client.run(Chat("t2", tuple(conv), SamplingParams(max_tokens=LIMIT)))[-1]
    assert isinstance(done, Done) and list(done.token_ids) == oracle.chat(conv, LIMIT)
