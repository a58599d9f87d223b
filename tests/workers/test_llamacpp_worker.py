"""A GGUF file on llama.cpp as a local worker (issue 23 §2): the app's own llama.cpp child serves a
tiny random Llama written as GGUF in the test, through the real gateway. A chat is served and its
second turn hits llama.cpp's prompt cache; Stop ends a reply; the child's death fails the running
reply with a sentence and the worker comes back by itself; a truncated or foreign file is refused
with a sentence; what llama.cpp cannot do here is refused before it reaches the server."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from gguf_files import write_llama

from desktop.gateway.gateway import Gateway
from desktop.model.images import ImageData
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, ChunkEvent, Done, ErrorEvent, PrefillDone, WorkerState, WorkerStatus
from desktop.workers.llamacpp.features import GRAMMAR, IMAGES, RAW
from desktop.workers.llamacpp.host import LlamaCppHost
from desktop.workers.llamacpp.plan import ServerPlan

pytest.importorskip("xllamacpp")
FAST = dict(health_s=0.3, backoff=(0.1, 0.4), timeout_s=2.0)
GREEDY = {"temperature": 0.0}


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    return write_llama(tmp_path_factory.mktemp("gguf") / "tiny-Q8_0.gguf", "Q8_0", std=0.3)


class Tap:
    """A sink that keeps every event."""

    def __init__(self) -> None:
        self.seen: list = []

    def __call__(self, _wid: str, event: object) -> None:
        self.seen.append(event)

    def statuses(self) -> list[WorkerStatus]:
        return [e for e in self.seen if isinstance(e, WorkerStatus)]

    def wait(self, pred, timeout: float = 60.0, start: int = 0):
        end = time.monotonic() + timeout
        while True:
            found = [e for e in list(self.seen)[start:] if pred(e)]
            if found:
                return found[-1]
            assert time.monotonic() < end, f"timed out; seen: {self.seen[-5:]}"
            time.sleep(0.05)


def host_for(path, slots: int = 2) -> LlamaCppHost:
    return LlamaCppHost("llama0", str(path), ServerPlan(slots=slots, kv_budget_bytes=0, threads=1), **FAST)


def test_a_gguf_chat_is_served_and_its_second_turn_hits_the_prompt_cache(tiny_gguf):
    host = host_for(tiny_gguf)

    async def main() -> None:
        gw = Gateway([host])
        await gw.start()
        try:
            assert await gw.wait_ready(60)
            conv = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Hello there, how are you?"}]
            events = [e async for e in gw.chat(conv, {"max_tokens": 6, **GREEDY})]
            done = events[-1]
            assert isinstance(done, Done) and done.stats.generated_tokens > 0, done
            assert any(isinstance(e, PrefillDone) for e in events)
            assert "".join(e.text_delta for e in events if isinstance(e, ChunkEvent)) == done.text
            conv += [{"role": "assistant", "content": done.text}, {"role": "user", "content": "And the weather?"}]
            second = [e async for e in gw.chat(conv, {"max_tokens": 4, **GREEDY})][-1]
            assert isinstance(second, Done), second
            assert second.stats.cached_tokens > 0 and second.stats.kind == "extend", second.stats
            assert second.stats.new_tokens < second.stats.input_tokens
            status = gw.stats()
            assert status is not None
        finally:
            await gw.close()

    asyncio.run(asyncio.wait_for(main(), 120))
    assert host.pid is None or _gone(host.pid), "closing the worker ends its llama.cpp child"


def _gone(pid: int) -> bool:
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_stop_ends_a_reply_and_the_next_turn_is_served(tiny_gguf):
    host = host_for(tiny_gguf, slots=1)

    async def main() -> None:
        gw = Gateway([host])
        await gw.start()
        try:
            assert await gw.wait_ready(60)
            stream = gw.chat([{"role": "user", "content": "Tell me a long story."}],
                             {"max_tokens": 1500, "ignore_eos": True, **GREEDY}, request_id="long")
            first = await anext(stream)
            assert isinstance(first, (PrefillDone, ChunkEvent))
            await gw.cancel("long")
            end = [e async for e in stream][-1]
            assert isinstance(end, Done) and end.stats.finish_reason == "stopped", end
            assert end.stats.generated_tokens < 1500
            again = [e async for e in gw.chat([{"role": "user", "content": "Hi"}], {"max_tokens": 2})][-1]
            assert isinstance(again, Done), again
        finally:
            await gw.close()

    asyncio.run(asyncio.wait_for(main(), 120))


def test_the_childs_death_fails_its_reply_clearly_and_the_worker_comes_back(tiny_gguf):
    host = host_for(tiny_gguf, slots=1)

    async def main() -> None:
        gw = Gateway([host])
        await gw.start()
        try:
            assert await gw.wait_ready(60)
            pid = host.pid
            stream = gw.chat([{"role": "user", "content": "Tell me a long story."}],
                             {"max_tokens": 1500, "ignore_eos": True})
            await anext(stream)
            os.kill(pid, signal.SIGKILL)  # as a crash would
            err = [e async for e in stream][-1]
            assert isinstance(err, ErrorEvent) and err.code == "worker_crashed" and err.retryable, err
            assert "llama.cpp worker stopped" in err.message and "127.0.0.1" not in err.message
            end = time.monotonic() + 60
            while True:  # restarted by the host: a new child serves
                try:
                    done = [e async for e in gw.chat([{"role": "user", "content": "Hello again"}], {"max_tokens": 2})][-1]
                except Exception:  # noqa: BLE001 - not back yet
                    done = None
                if isinstance(done, Done):
                    break
                assert time.monotonic() < end, done
                await asyncio.sleep(0.2)
            assert host.pid != pid
        finally:
            await gw.close()

    asyncio.run(asyncio.wait_for(main(), 120))


def test_the_childs_death_is_reported_as_a_restarting_worker(tiny_gguf):
    host, tap = host_for(tiny_gguf, slots=1), Tap()
    host.start(tap)
    try:
        tap.wait(lambda e: isinstance(e, WorkerStatus) and e.state is WorkerState.IDLE)
        idle = tap.statuses()[-1]
        assert idle.device.startswith("llama.cpp") and idle.model == "tiny-Q8_0.gguf" and idle.context_length > 0, idle
        os.kill(host.pid, signal.SIGKILL)
        crashed = tap.wait(lambda e: isinstance(e, WorkerStatus) and e.state is WorkerState.ERROR)
        assert crashed.code == "worker_crashed" and crashed.restarting, crashed
        assert "llama.cpp worker stopped" in crashed.message and "restarting" in crashed.message
        n = len(tap.seen)
        tap.wait(lambda e: isinstance(e, WorkerStatus) and e.state is WorkerState.IDLE, start=n)
    finally:
        host.close()


@pytest.mark.parametrize("damage", ["truncated", "not_gguf", "missing"])
def test_a_bad_gguf_is_refused_with_a_sentence(tiny_gguf, tmp_path, damage):
    data = tiny_gguf.read_bytes()
    bad = tmp_path / "model.gguf"
    if damage == "truncated":
        bad.write_bytes(data[: len(data) * 2 // 3])
    elif damage == "not_gguf":
        bad.write_bytes(b"<html>404 Not Found</html>" * 10)
    host, tap = host_for(bad), Tap()
    host.start(tap)
    try:
        err = tap.wait(lambda e: isinstance(e, WorkerStatus) and e.state is WorkerState.ERROR, 30)
    finally:
        host.close()
    assert err.code == "model_load" and not err.restarting, err
    assert "model.gguf" in err.message and "Traceback" not in err.message
    expected = {"truncated": "cut short", "not_gguf": "not a GGUF model file", "missing": "does not exist"}[damage]
    assert expected in err.message, err.message
    assert host.pid is None, "no llama.cpp child is started for a bad file"


def test_what_llamacpp_cannot_do_here_is_refused_with_a_sentence(tiny_gguf):
    """Refused before the server is asked: these arrive even while the model loads."""
    host, tap = host_for(tiny_gguf), Tap()
    host._sink = tap  # not started: the refusals need no server
    image = ImageData.from_bytes(_png())
    cases = [(Chat("raw", (Message("user", "Once upon"),), raw=True), RAW),
             (Chat("json", (Message("user", "Give JSON"),), SamplingParams(grammar='start: "{}"')), GRAMMAR),
             (Chat("img", (Message("user", "What is this?", (image,)),)), IMAGES)]
    for cmd, sentence in cases:
        host.submit(cmd)
        err = tap.seen[-1]
        assert isinstance(err, ErrorEvent) and err.request_id == cmd.request_id and err.message == sentence
        assert "Settings → Model" in err.message
    host.submit(Chat("plain", (Message("user", "Hi"),)))
    assert tap.seen[-1].code == "not_ready"  # a plain chat is not refused, only not ready yet


def _png() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(out, "PNG")
    return out.getvalue()


def test_a_chat_past_the_kv_pool_is_refused_with_what_to_do(tiny_gguf):
    """No slide on llama.cpp: a conversation longer than its KV pool ends with a sentence saying so."""
    host = LlamaCppHost("llama0", str(tiny_gguf), ServerPlan(slots=1, kv_budget_bytes=1, threads=1), **FAST)  # MIN_POOL

    async def main() -> None:
        gw = Gateway([host])
        await gw.start()
        try:
            assert await gw.wait_ready(60)
            text = " ".join(f"word{i}" for i in range(150))  # each message within the gateway's limit
            conv = [{"role": ("user", "assistant")[i % 2], "content": text} for i in range(7)]
            err = [e async for e in gw.chat(conv, {"max_tokens": 2})][-1]
            assert isinstance(err, ErrorEvent) and err.code == "context_length_exceeded", err
            assert "do not slide" in err.message and "127.0.0.1" not in err.message, err.message
        finally:
            await gw.close()

    asyncio.run(asyncio.wait_for(main(), 120))
