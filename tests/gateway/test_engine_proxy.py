"""The engine's front door: the gateway and the composition's proxy both offer EngineApi; the
proxy forwards every call to the gateway of the moment and refuses at once while there is none."""

from __future__ import annotations

import pytest

from desktop.errors import OmnideskError
from desktop.protocol import Done, EngineStats
from desktop.protocol.engine import EngineApi, RequestEvents
from desktop.engine_proxy import EngineProxy
from fake_host import FakeHost
from gw_helpers import collect, gateway, run, terminal, user


def test_without_an_engine_every_call_is_refused_at_once_as_not_ready() -> None:
    proxy = EngineProxy()
    calls = [lambda: proxy.chat([user("hi")]), lambda: proxy.cancel("r1"), lambda: proxy.create_session(),
             lambda: proxy.end_session("s"), lambda: proxy.truncate_reply("s", ""), lambda: proxy.stats(),
             lambda: proxy.append_input("s", [user("hi")]), lambda: proxy.generate_stream("s"),
             lambda: proxy.pause_call("s", True), lambda: proxy.context_length(), lambda: proxy.observers]
    for call in calls:  # raised by the call itself: no coroutine is left unawaited
        with pytest.raises(OmnideskError) as err:
            call()
        assert err.value.code == "not_ready" and err.value.retryable


def test_the_proxy_forwards_to_the_gateway_of_the_moment() -> None:
    async def main() -> None:
        proxy = EngineProxy()
        async with gateway(FakeHost("w1", auto=0.001)) as gw:
            proxy.target = gw
            assert isinstance(gw, EngineApi) and isinstance(proxy, EngineApi)
            seen: list[str] = []
            proxy.observers.append(lambda entry, event: seen.append(event.request_id))
            stream = proxy.chat([user("hi")], request_id="r1", origin="api")
            assert isinstance(stream, RequestEvents)
            assert isinstance(terminal(await collect(stream)), Done) and seen == ["r1"]
            sid = await proxy.create_session("Be brief.")
            await proxy.end_session(sid)
            stats = proxy.stats()
            assert isinstance(stats, EngineStats) and stats.origins == {"api": 1, "app": 1} and await proxy.wait_ready()
        proxy.target = None
        with pytest.raises(OmnideskError):
            proxy.stats()
    run(main())
