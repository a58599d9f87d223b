"""What a remote worker (an OpenAI-compatible server that takes chats) is not asked for is refused
with a sentence before it leaves: a raw prompt (/v1/completions; never sent on as a chat with a
template around it), images (sent as text they would be lost) and constrained output (a server
would ignore our grammar: a required tool call or response_format would silently not hold)."""

from __future__ import annotations

import pytest
from hostile_server import HostileServer, wait_for

from desktop.model.images import ImageData
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, ErrorEvent, WorkerState, WorkerStatus
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.spec import RemoteSpec

PICTURE = ImageData(b"png", bytes(range(32)), "image/png", 3, 4)
CASES = {
    "raw": (Chat("r", (Message("user", "Once upon"),), SamplingParams(max_tokens=4), raw=True), "takes chats only"),
    "images": (Chat("r", (Message("user", "look", (PICTURE,)),), SamplingParams(max_tokens=4)), "reads text only"),
    "grammar": (Chat("r", (Message("user", "JSON please"),), SamplingParams(max_tokens=4, grammar='start: "{}"')),
                "cannot be held to it"),
}


@pytest.fixture(scope="module")
def remote():
    server = HostileServer()
    seen: list = []
    host = RemoteHost("r0", RemoteSpec(server.url), health_s=0.2, backoff=(0.1, 0.4), timeout_s=5.0)
    host.start(lambda _w, e: seen.append(e))
    wait_for(lambda: any(isinstance(e, WorkerStatus) and e.state is WorkerState.IDLE for e in seen))
    yield host, seen, server
    host.close()
    server.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_remote_worker_refuses_what_it_cannot_be_asked_for(remote, case):
    host, seen, server = remote
    cmd, words = CASES[case]
    seen.clear()
    asked = server.asked
    host.submit(cmd)
    wait_for(lambda: any(getattr(e, "request_id", None) == "r" for e in seen))
    end = next(e for e in seen if getattr(e, "request_id", None) == "r")
    assert isinstance(end, ErrorEvent) and end.code == "invalid_request", end
    assert "remote worker" in end.message and words in end.message and server.url in end.message
    assert server.asked == asked  # nothing went to the server
