"""Warms in the worker (a chat with max_tokens 0: the draft being typed, prefilled): Send reads
only what changed, a warm never delays a running reply nor evicts a slot, it steps aside for a
real request, and a newer warm takes over the older one's slot."""

from __future__ import annotations

from worker_helpers import A, S, U, chat, check_integrity, make_client

from desktop.model.params import SamplingParams
from desktop.protocol import CacheReason, Chat, Done, Stop
from desktop.workers.scheduler import WARM_CHUNK
from desktop.workers.slots import common_prefix

WARM = SamplingParams(max_tokens=0)


def warm(client, rid: str, msgs) -> Done:
    done = client.run(Chat(rid, tuple(msgs), WARM))[-1]
    assert isinstance(done, Done), done
    return done


def ended(client, rid: str) -> Done | None:
    return next((e for e in client.events.get(rid, ()) if isinstance(e, Done)), None)


def test_send_after_a_warm_reads_only_what_changed(tiny_lm):
    t = tiny_lm.template
    client = make_client(tiny_lm, num_slots=2, cache_min_tokens=4, prefill_chunk=16, prefill_budget=32)
    conv = [S, U("Tell me about the sea.")]
    conv.append(A(chat(client, "r0", conv, 6).text))
    draft = conv + [U("What about rivers and lakes")]
    assert warm(client, "w1", draft).stats.finish_reason == "prefilled"
    final = conv + [U("What about rivers and lakes in the north?")]
    done = chat(client, "r1", final, 6)
    shared = common_prefix(t.prompt_ids(final), t.prompt_ids(draft))
    assert shared > done.stats.history_tokens  # the draft's words are part of what is shared
    assert done.stats.cached_tokens == shared, done.stats  # everything up to where the text changed
    assert done.stats.kind == "extend" and done.stats.miss_reason == CacheReason.CACHED.value
    # the same text sent as warmed: only the last id is read again
    again = conv + [A(done.text), U("And the mountains?")]
    warm(client, "w2", again)
    hit = chat(client, "r2", again, 6)
    assert hit.stats.kind == "hit" and hit.stats.cached_tokens == len(t.prompt_ids(again)) - 1


def test_a_warm_waits_while_a_reply_runs_and_steps_aside_for_a_new_one(tiny_lm):
    client = make_client(tiny_lm, num_slots=3, prefill_chunk=16, prefill_budget=32)
    w, sched = client.worker, client.worker.scheduler
    client.submit(Chat("real", (U("Count to twenty please"),), SamplingParams(max_tokens=10, ignore_eos=True)))
    while "real" not in sched.running:
        w.step()
    real = sched.running["real"]
    client.submit(Chat("warm", (S, U("A long draft that is still being typed " * 4)), WARM))
    while ended(client, "real") is None:  # every tick decodes the reply; the warm is not even admitted
        before = len(real.generated)
        w.step()
        check_integrity(w)
        assert len(real.generated) == before + 1 or ended(client, "real") is not None
        assert ended(client, "warm") is None and sched.waiting and sched.waiting[0].warm
    w.step()  # now the warm runs, in small chunks
    seq = sched.prefilling[0]
    assert seq.warm and seq.num_kv - seq.cached <= WARM_CHUNK
    client.submit(Chat("next", (U("Hello"),), SamplingParams(max_tokens=3)))
    w.step()  # a real request came: the warm ended first, its KV kept
    check_integrity(w)
    stopped = ended(client, "warm")
    assert stopped is not None and stopped.stats.finish_reason == "cancelled"
    assert sched.table.slots[stopped.stats.slot].ids == seq.prompt[: seq.num_kv]
    assert [s.request_id for s in sched.active()] == ["next"]


def test_a_warm_never_evicts(tiny_lm):
    client = make_client(tiny_lm, num_slots=1, cache_min_tokens=4)
    conv = [U("Tell me about the sea.")]
    conv.append(A(chat(client, "r0", conv, 6).text))
    skipped = warm(client, "w", [U("Something else entirely")])
    assert skipped.stats.finish_reason == "cancelled" and skipped.stats.slot == -1
    assert chat(client, "r1", conv + [U("More?")], 4).stats.kind == "extend"  # still cached


def test_a_newer_warm_takes_over_the_older_ones_slot(tiny_lm):
    t = tiny_lm.template
    client = make_client(tiny_lm, num_slots=2, prefill_chunk=16, prefill_budget=16)
    w, sched = client.worker, client.worker.scheduler
    conv = [S, U("Hi"), A("Hello! How can I help?")]
    old = conv + [U("I would like to know about the history of the " * 3)]
    client.submit(Chat("w1", tuple(old), WARM))
    w.step()
    assert sched.prefilling and sched.prefilling[0].request_id == "w1"
    client.submit(Stop("w1"))  # what the gateway sends when a newer draft comes
    new = conv + [U("I would like to know about the history of the Romans")]
    client.submit(Chat("w2", tuple(new), WARM))
    while (done := ended(client, "w2")) is None:
        w.step()
        check_integrity(w)
    first = ended(client, "w1")
    assert first.stats.finish_reason == "cancelled" and done.stats.slot == first.stats.slot
    assert done.stats.cached_tokens == min(common_prefix(t.prompt_ids(old), t.prompt_ids(new)),
                                           first.stats.cached_tokens + 16)
