"""The gateway over the real thread host and the tiny model: a conversation's second turn hits
its cache on the worker that holds it, a session runs end to end, a cancel stops a generation."""

from __future__ import annotations

import pytest

from desktop.gateway.gateway import Gateway
from desktop.errors import OmnideskError
from desktop.protocol import Done, PrefillDone
from desktop.model.loader import ModelSpec
from desktop.model.params import SamplingParams
from desktop.workers.config import WorkerConfig
from desktop.workers.thread_host import ThreadHost
from gw_helpers import bot, collect, run, terminal, user


def test_gateway_over_thread_hosts_with_the_tiny_model() -> None:
    async def main() -> None:
        config = WorkerConfig(num_slots=2, max_running=2, cache_min_tokens=4)
        gw = Gateway([ThreadHost(f"t{i}", ModelSpec("tiny"), config, threads=1) for i in range(2)])
        await gw.start()
        assert await gw.wait_ready(timeout=60)
        params = SamplingParams(max_tokens=6)
        convs = [[user("Hello there")], [user("What is the weather like?")]]
        for i in range(2):
            for msgs in convs:
                events = await collect(gw.chat(msgs, params))
                end, prefill = terminal(events), next(e for e in events if isinstance(e, PrefillDone))
                assert isinstance(end, Done), end
                assert prefill.kind == ("miss" if i == 0 else "extend") and (i == 0) == (prefill.cached_tokens == 0)
                msgs += [bot(end.text), user(f"and then {i}?")]
        sid = await gw.create_session("You are a helpful assistant.")
        assert isinstance(terminal(await collect(gw.append_input(sid, [user("Hi")]))), Done)
        assert terminal(await collect(gw.generate_stream(sid, params))).stats.generated_tokens > 0
        long = gw.generate_stream(sid, SamplingParams(max_tokens=500, ignore_eos=True))
        await gw.cancel(long.request_id)
        cut = terminal(await collect(long))
        assert cut.stats.finish_reason == "cancelled"
        # a barge-in: the cut reply becomes what was heard, then the call goes on
        await gw.truncate_reply(sid, " ".join(cut.text.split()[:2]) or "Hm")
        assert isinstance(terminal(await collect(gw.append_input(sid, [user("Go on")]))), Done)
        with pytest.raises(OmnideskError) as err:  # the last message is the user's now
            await gw.truncate_reply(sid, "")
        assert err.value.code == "invalid_request"
        assert terminal(await collect(gw.generate_stream(sid, params))).stats.generated_tokens > 0
        await gw.end_session(sid)
        stats = gw.stats()
        assert stats.routing["hit"] == 2 and stats.requests.failed == 1  # the refused truncation
        requests = stats.requests
        assert requests.completed + requests.cancelled + requests.failed == requests.submitted
        await gw.close()
    run(main(), timeout=90)
