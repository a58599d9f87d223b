"""When no worker can serve: a local model that failed to load beside remote servers that do not
answer means "no model is loaded" (with the load error's reason, not retryable), never "the model
stopped unexpectedly… try again"; a worker that crashed for good still reads as a crash."""

from __future__ import annotations

import asyncio
import socket

import pytest

from desktop.gateway.gateway import Gateway
from desktop.gateway.health import no_service
from desktop.gateway.mirror import WorkerMirror
from desktop.errors import ModelLoadError, WorkerCrashed
from desktop.model.loader import ModelSpec
from desktop.model.messages import Message
from desktop.protocol import WorkerState
from desktop.ui.chat.notice import friendly
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.spec import RemoteSpec
from desktop.workers.thread_host import ThreadHost

LOAD = "/models/x is not a model folder: it has no config.json."


def down(worker_id: str, code: str, message: str = "") -> WorkerMirror:
    return WorkerMirror(worker_id, state=WorkerState.ERROR, code=code, message=message)


def test_a_failed_load_beside_unreachable_remotes_is_no_model():
    err = no_service([down("local", "model_load", LOAD), down("gpu", "remote_unreachable", "unreachable: …")])
    assert isinstance(err, ModelLoadError) and not err.retryable
    assert err.message.startswith("No model is loaded: " + LOAD)
    assert "gpu does not answer" in err.message and "unreachable: …" not in err.message


def test_a_crash_still_reads_as_a_crash():
    assert isinstance(no_service([down("local", "model_load", LOAD), down("w1", "worker_crashed", "boom")]), WorkerCrashed)
    assert isinstance(no_service([down("gpu", "remote_unreachable")]), WorkerCrashed)  # no load failed: it may come back
    assert no_service([down("local", "model_load", LOAD), WorkerMirror("gpu", state=WorkerState.IDLE)]) is None


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sending_with_a_bad_model_and_an_unreachable_server_says_no_model_and_points_to_settings(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    remote = RemoteHost("gpu", RemoteSpec(f"http://127.0.0.1:{closed_port()}"), backoff=(0.1, 0.4), timeout_s=1.0)

    async def main() -> None:
        gw = Gateway([ThreadHost("local", ModelSpec(str(tmp_path))), remote])
        await gw.start()
        try:
            assert not await gw.wait_ready(30)
            with pytest.raises(ModelLoadError) as caught:
                gw.chat([Message("user", "hello")])
        finally:
            await gw.close()
        err = caught.value
        assert "no config.json" in err.message and "gpu does not answer" in err.message
        head, detail = friendly(err.code, err.message, err.retryable)  # what the chat shows
        assert "No model is loaded" in head and "Settings → Model" in head
        assert "try again" not in head and "stopped unexpectedly" not in head
        assert "no config.json" in detail

    asyncio.run(main())
