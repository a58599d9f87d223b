"""Remote workers against real llama.cpp servers (xllamacpp, the embedded GGUF, on 127.0.0.1),
through the real gateway: a conversation's second turn comes back to the worker and slot that hold
it and the server reports cached prompt tokens; a server that is killed fails its request with a
clear error and turns unreachable, and comes back when it is restarted on the same port; a wrong
API key is said plainly; a session's reply can be cut to what the user heard; a server added to a
running gateway serves, and removing it ends its running reply while the local worker's cache stays."""

from __future__ import annotations

import asyncio
import time

import pytest

from desktop.gateway.gateway import Gateway
from desktop.errors import WorkerCrashed
from desktop.model.loader import ModelSpec
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import (
    AppendInput, Chat, ChunkEvent, CreateSession, Done, ErrorEvent, Generate, PrefillDone, TruncateReply, WorkerHost,
    WorkerState, WorkerStatus,
)
from desktop.workers.config import WorkerConfig
from desktop.workers.remote.host import UNREACHABLE, RemoteHost
from desktop.workers.remote.llama_server import LlamaServer
from desktop.workers.remote.spec import RemoteSpec
from desktop.workers.thread_host import ThreadHost

pytestmark = pytest.mark.real_model
FAST = dict(health_s=0.3, backoff=(0.1, 0.4), timeout_s=2.0)


class Recorded(WorkerHost):
    """A host that remembers which requests it was given, and every status it reported."""

    def __init__(self, inner: RemoteHost) -> None:
        self.inner, self.worker_id = inner, inner.worker_id
        self.requests: list[str] = []
        self.statuses: list[WorkerStatus] = []

    def start(self, sink) -> None:
        def tap(worker_id, event) -> None:
            if isinstance(event, WorkerStatus):
                self.statuses.append(event)
            sink(worker_id, event)
        self.inner.start(tap)

    def submit(self, cmd) -> None:
        if isinstance(cmd, Chat):
            self.requests.append(cmd.request_id)
        self.inner.submit(cmd)

    def close(self, timeout: float = 5.0) -> None:
        self.inner.close(timeout)


@pytest.fixture(scope="module")
def servers():
    started = [LlamaServer(ctx=512, slots=2, threads=1) for _ in range(2)]
    for s in started:
        s.start()
    yield started
    for s in started:
        s.kill()


async def turn(gw: Gateway, messages: list[dict], rid: str) -> tuple[Done, list]:
    events = [e async for e in gw.chat(messages, {"max_tokens": 6, "temperature": 0.0}, request_id=rid)]
    assert isinstance(events[-1], Done), events[-1]
    return events[-1], events


def test_second_turns_come_back_to_their_worker_and_hit_the_servers_cache(servers):
    hosts = [Recorded(RemoteHost(f"r{i}", RemoteSpec(s.url), **FAST)) for i, s in enumerate(servers)]

    async def main() -> None:
        gw = Gateway(hosts)
        await gw.start()
        assert await gw.wait_ready(30)
        try:
            convs = [[{"role": "system", "content": "You are brief."},
                      {"role": "user", "content": f"Name a colour, please. ({topic})"}] for topic in ("sea", "sun", "snow")]
            firsts = await asyncio.gather(*(turn(gw, c, f"t1-{i}") for i, c in enumerate(convs)))
            for conv, (done, events) in zip(convs, firsts):
                assert done.stats.input_tokens > 0 and done.stats.generated_tokens > 0
                assert "".join(e.text_delta for e in events if isinstance(e, ChunkEvent)) == done.text
                assert any(isinstance(e, PrefillDone) for e in events), "llama.cpp reports the prompt with the first token"
                conv += [{"role": "assistant", "content": done.text}, {"role": "user", "content": "And another?"}]
            for i, conv in enumerate(convs):
                done, _ = await turn(gw, conv, f"t2-{i}")
                first_on = next(h.worker_id for h in hosts if f"t1-{i}" in h.requests)
                second_on = next(h.worker_id for h in hosts if f"t2-{i}" in h.requests)
                assert second_on == first_on, f"conversation {i} moved from {first_on} to {second_on}"
                assert done.stats.cached_tokens > 0, done.stats  # the server's own accounting
                assert done.stats.new_tokens < done.stats.input_tokens and done.stats.kind == "extend"
            assert gw.stats().routing["hit"] == 3
        finally:
            await gw.close()

    asyncio.run(asyncio.wait_for(main(), 120))


def test_a_killed_server_fails_clearly_turns_unreachable_and_comes_back():
    server = LlamaServer(ctx=512, slots=1, threads=1)
    server.start()
    host = Recorded(RemoteHost("r0", RemoteSpec(server.url), **FAST))

    async def until(pred, timeout: float = 20.0) -> None:
        end = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < end, "timed out"
            await asyncio.sleep(0.05)

    async def main() -> None:
        gw = Gateway([host])
        await gw.start()
        assert await gw.wait_ready(30)
        try:
            stream = gw.chat([{"role": "user", "content": "Tell me a long story."}],
                             {"max_tokens": 400, "ignore_eos": True})
            first = await anext(stream)
            assert isinstance(first, (PrefillDone, ChunkEvent))
            server.kill()
            events = [e async for e in stream]
            err = events[-1]
            assert isinstance(err, ErrorEvent) and err.code == UNREACHABLE and err.retryable, err
            assert server.url in err.message and "stopped answering" in err.message
            await until(lambda: host.statuses[-1].state is WorkerState.ERROR)
            status = host.statuses[-1]
            assert status.code == UNREACHABLE and status.message.startswith("unreachable:") and server.url in status.message
            with pytest.raises(WorkerCrashed, match="unreachable"):  # nothing else can serve: said at once
                gw.chat([{"role": "user", "content": "Hello?"}])

            server.start()  # the same port
            await until(lambda: host.statuses[-1].state is WorkerState.IDLE)
            done = [e async for e in gw.chat([{"role": "user", "content": "Hello again"}], {"max_tokens": 3})][-1]
            assert isinstance(done, Done) and done.stats.generated_tokens > 0, done
        finally:
            await gw.close()
            server.kill()

    asyncio.run(asyncio.wait_for(main(), 120))


def test_an_unknown_model_name_is_refused_with_the_names_the_server_has(servers):
    host = Recorded(RemoteHost("r0", RemoteSpec(servers[0].url, model="no-such-model"), **FAST))
    seen: list = []
    host.start(lambda _w, e: seen.append(e))
    try:
        end = time.monotonic() + 20
        while not any(isinstance(s, WorkerStatus) and s.state is WorkerState.ERROR for s in seen):
            assert time.monotonic() < end
            time.sleep(0.05)
        status = next(s for s in seen if isinstance(s, WorkerStatus) and s.state is WorkerState.ERROR)
        assert "no-such-model" in status.message and ".gguf" in status.message, status.message
    finally:
        host.close()


def wait_status(seen: list, state: WorkerState, timeout: float = 20.0) -> WorkerStatus:
    end = time.monotonic() + timeout
    while True:
        found = [s for s in seen if isinstance(s, WorkerStatus) and s.state is state]
        if found:
            return found[0]
        assert time.monotonic() < end, f"no {state.value} status: {seen}"
        time.sleep(0.05)


def test_a_wrong_api_key_is_said_plainly_and_the_right_one_serves():
    with LlamaServer(ctx=256, slots=1, threads=1, api_key="sk-right") as server:
        for key, state in (("sk-wrong", WorkerState.ERROR), ("sk-right", WorkerState.IDLE)):
            host, seen = RemoteHost("r0", RemoteSpec(server.url, api_key=key), **FAST), []
            host.start(lambda _w, e: seen.append(e))
            try:
                status = wait_status(seen, state)
                if state is WorkerState.ERROR:
                    assert "refused the API key (HTTP 401)" in status.message, status.message
                else:
                    host.submit(Chat("c", (Message("user", "Hi"),), SamplingParams(max_tokens=2)))
                    end = time.monotonic() + 20
                    while not any(isinstance(e, (Done, ErrorEvent)) for e in seen):
                        assert time.monotonic() < end
                        time.sleep(0.05)
                    assert isinstance(seen[-1], Done), seen[-1]
            finally:
                host.close()


def test_a_session_reply_can_be_cut_to_what_was_heard(servers):
    host, seen = RemoteHost("r0", RemoteSpec(servers[1].url), **FAST), []
    host.start(lambda _w, e: seen.append(e))

    def result(rid: str):
        end = time.monotonic() + 20
        while not any(isinstance(e, (Done, ErrorEvent)) and e.request_id == rid for e in seen if not isinstance(e, WorkerStatus)):
            assert time.monotonic() < end
            time.sleep(0.02)
        return next(e for e in seen if isinstance(e, (Done, ErrorEvent)) and e.request_id == rid)

    try:
        wait_status(seen, WorkerState.IDLE)
        host.submit(CreateSession("k1", "s", "You are brief."))
        host.submit(AppendInput("k2", "s", (Message("user", "Count to five."),)))
        host.submit(Generate("k3", "s", SamplingParams(max_tokens=8)))
        reply = result("k3")
        assert isinstance(reply, Done) and reply.text
        host.submit(TruncateReply("k4", "s", "One,"))
        assert isinstance(result("k4"), Done)
        assert [m.content for m in host.slots.session("s").messages][-2:] == ["Count to five.", "One,"]
        host.submit(TruncateReply("k5", "s", ""))  # drops the reply
        assert isinstance(result("k5"), Done) and host.slots.session("s").messages[-1].role == "user"
        host.submit(TruncateReply("k6", "s", "x"))  # nothing left to cut
        assert isinstance(result("k6"), ErrorEvent)
        host.submit(Generate("k7", "s", SamplingParams(max_tokens=4)))
        again = result("k7")
        assert isinstance(again, Done) and again.stats.cached_tokens > 0  # the system prompt and question were kept
    finally:
        host.close()


def test_a_server_added_to_a_running_gateway_serves_and_removing_it_ends_its_reply(servers):
    """Remote workers changed in Settings: the server joins beside the tiny local worker without a
    restart, serves (and hits its own cache), and leaves with its running reply ended clearly;
    the local conversation hits its cache throughout."""
    local = ThreadHost("cpu0", ModelSpec("tiny"), WorkerConfig(num_slots=1, cache_min_tokens=4), threads=1)
    remote = Recorded(RemoteHost("remote0", RemoteSpec(servers[0].url), **FAST))

    async def main() -> None:
        gw = Gateway([local])
        await gw.start()
        assert await gw.wait_ready(60)
        try:
            mine = [{"role": "user", "content": "Hello there, how are you today?"}]
            done, _ = await turn(gw, mine, "local-1")
            mine += [{"role": "assistant", "content": done.text}, {"role": "user", "content": "And then?"}]
            gw.add_host(remote)
            end = time.monotonic() + 30
            while {w.id: w.state for w in gw.stats().workers}.get("remote0") != "idle":
                assert time.monotonic() < end, gw.stats().workers
                await asyncio.sleep(0.05)
            assert remote.statuses[0].state is WorkerState.LOADING
            conv = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Name a fruit."}]
            first, _ = await turn(gw, conv, "r-1")  # cpu0's one slot holds the local conversation
            conv += [{"role": "assistant", "content": first.text}, {"role": "user", "content": "Another one?"}]
            second, _ = await turn(gw, conv, "r-2")
            assert remote.requests == ["r-1", "r-2"] and second.stats.cached_tokens > 0 and second.stats.kind == "extend"
            done, events = await turn(gw, mine, "local-2")
            prefill = next(e for e in events if isinstance(e, PrefillDone))
            assert prefill.kind == "extend" and prefill.cached_tokens > 0 and "local-2" not in remote.requests

            stream = gw.chat([{"role": "user", "content": "Tell me a long story."}], {"max_tokens": 200, "ignore_eos": True},
                             request_id="long")
            assert isinstance(await anext(stream), (PrefillDone, ChunkEvent)) and "long" in remote.requests
            await gw.remove_host("remote0")
            err = [e async for e in stream][-1]
            assert isinstance(err, ErrorEvent) and err.code == "worker_removed" and err.retryable
            assert "Worker remote0 was removed" in err.message
            assert [w.id for w in gw.stats().workers] == ["cpu0"] and not remote.inner._thread.is_alive()
            mine += [{"role": "assistant", "content": done.text}, {"role": "user", "content": "Go on."}]
            _, events = await turn(gw, mine, "local-3")
            assert next(e for e in events if isinstance(e, PrefillDone)).cached_tokens > prefill.cached_tokens
        finally:
            await gw.close()

    asyncio.run(asyncio.wait_for(main(), 120))
