"""A raw prompt (/v1/completions) sent to a remote worker (an OpenAI-compatible server that takes
chats) is refused with a sentence, never sent on as a chat with a template around it."""

from __future__ import annotations

from hostile_server import HostileServer, wait_for

from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, ErrorEvent, WorkerState, WorkerStatus
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.spec import RemoteSpec


def test_a_remote_worker_refuses_a_raw_prompt():
    server = HostileServer()
    seen: list = []
    host = RemoteHost("r0", RemoteSpec(server.url), health_s=0.2, backoff=(0.1, 0.4), timeout_s=5.0)
    try:
        host.start(lambda _w, e: seen.append(e))
        wait_for(lambda: any(isinstance(e, WorkerStatus) and e.state is WorkerState.IDLE for e in seen))
        host.submit(Chat("r", (Message("user", "Once upon"),), SamplingParams(max_tokens=4), raw=True))
        wait_for(lambda: any(getattr(e, "request_id", None) == "r" for e in seen))
        end = next(e for e in seen if getattr(e, "request_id", None) == "r")
        assert isinstance(end, ErrorEvent) and end.code == "invalid_request" and "remote worker" in end.message
    finally:
        host.close()
        server.close()
