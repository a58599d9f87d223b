"""Issue 19, item 6: a remote server of the wrong kind kept the app loading forever. Whatever
/props and /v1/models say, the health loop lives on, logs it, and marks the worker unusable with
the reason (which Admin shows); once the server answers as it should, the worker comes up."""

from __future__ import annotations

import asyncio
import logging

import pytest
from hostile_server import HostileServer, answer, wait_for

from desktop.gateway.gateway import Gateway
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, ErrorEvent, WorkerState, WorkerStatus
from desktop.gateway.monitor import EngineMonitor
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.spec import RemoteSpec

pytestmark = pytest.mark.hardening
LLAMA = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2}

HOSTILE = [  # (path, raw JSON body, what the reason names)
    ("/props", '{"default_generation_settings": {"n_ctx": 1e999}, "total_slots": 2}', "n_ctx"),
    ("/props", '{"default_generation_settings": {"n_ctx": -4096}}', "n_ctx"),
    ("/props", '{"default_generation_settings": {"n_ctx": "abc"}}', "n_ctx"),
    ("/props", '{"default_generation_settings": {"n_ctx": 4096.5}}', "n_ctx"),
    ("/props", '{"default_generation_settings": {"n_ctx": 4096}, "total_slots": 100000000}', "total_slots"),
    ("/props", '{"default_generation_settings": {"n_ctx": 4096}, "total_slots": -1}', "total_slots"),
    ("/props", '{"default_generation_settings": {"n_ctx": 4096}, "total_slots": true}', "total_slots"),
    ("/props", '{"default_generation_settings": "fast"}', "default_generation_settings"),
    ("/v1/models", '{"data": 5}', "no list of models"),
    ("/v1/models", '{"data": {"id": "m"}}', "no list of models"),
    ("/v1/models", '[1, 2, 3]', "not a JSON object"),
    ("/v1/models", '<html>hello</html>', "not JSON"),
    ("/v1/models", '{"data": [{"id": "m", "max_model_len": "abc"}]}', "max_model_len"),
    ("/v1/models", '{"data": [{"id": "m", "max_model_len": 1e999}]}', "max_model_len"),
    ("/v1/models", '{"data": [{"id": "m", "max_model_len": 1e30}]}', "max_model_len"),
]


@pytest.fixture
def server():
    s = HostileServer()
    s.routes["/props"] = answer(LLAMA)
    yield s
    s.close()


@pytest.mark.parametrize("path, body, said", HOSTILE, ids=[f"{p}:{b[:40]}" for p, b, _ in HOSTILE])
def test_a_hostile_answer_marks_the_worker_unusable_and_the_checks_go_on(server, caplog, path, body, said):
    server.routes[path] = answer(body)
    seen: list = []
    host = RemoteHost("r0", RemoteSpec(server.url), health_s=0.2, backoff=(0.05, 0.2), timeout_s=5.0)
    caplog.set_level(logging.WARNING, logger="desktop.workers.remote.host")
    host.start(lambda _w, e: seen.append(e))
    statuses = lambda: [e for e in seen if isinstance(e, WorkerStatus)]  # noqa: E731
    try:
        wait_for(lambda: any(s.state is WorkerState.ERROR for s in statuses()))
        down = next(s for s in statuses() if s.state is WorkerState.ERROR)
        assert down.code == "remote_unusable" and said in down.message and server.url in down.message, down
        assert "Traceback" not in down.message
        assert any(said in r.getMessage() for r in caplog.records)  # in the log, once
        host.submit(Chat("c", (Message("user", "hi"),), SamplingParams(max_tokens=4)))
        wait_for(lambda: any(isinstance(e, ErrorEvent) and e.request_id == "c" for e in seen))
        refused = next(e for e in seen if isinstance(e, ErrorEvent))
        assert refused.code == "remote_unusable" and said in refused.message
        server.routes[path] = answer({"data": [{"id": "scripted"}]} if path == "/v1/models" else LLAMA)
        wait_for(lambda: statuses()[-1].state is WorkerState.IDLE)  # the loop lived on and saw the change
        assert sum(s.state is WorkerState.ERROR for s in statuses()) == 1
    finally:
        host.close()


def test_admin_shows_the_reason_and_the_engine_is_ready_not_loading(server):
    server.routes["/v1/models"] = answer('{"data": 5}')
    monitor = EngineMonitor()

    async def main() -> None:
        host = RemoteHost("remote0", RemoteSpec(server.url), health_s=0.2, backoff=(0.05, 0.2), timeout_s=5.0)
        gw = Gateway([host])
        monitor.watch(gw)
        await gw.start()
        try:
            await gw.wait_ready(20)
            row = monitor.snapshot(gw).workers[0]
            assert row.state == "error" and "unusable" in row.message and "no list of models" in row.message, row
        finally:
            await gw.close()

    asyncio.run(asyncio.wait_for(main(), 60))
