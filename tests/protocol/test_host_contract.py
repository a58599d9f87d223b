"""One contract, four hosts: the fake host the engine tests use, the thread host and the spawned
process host (both on the tiny model), and the remote host on a real llama.cpp server (xllamacpp,
the embedded GGUF, on 127.0.0.1) are driven through desktop.protocol alone and must behave the same: LOADING then IDLE, exactly one terminal event per request, Stop, sessions, a bad
request answered while the host keeps serving, close() failing what is in flight, submit()
never blocking its caller."""

from __future__ import annotations

import atexit
import pathlib
import shutil
import sys
import tempfile
import threading
import time
from typing import Callable

import pytest

from desktop.model.loader import ModelSpec
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import (
    TERMINAL, AppendInput, Chat, ChunkEvent, CreateSession, Done, EndSession, ErrorEvent, Generate, Stop,
    WorkerHost, WorkerState, WorkerStatus,
)
from desktop.workers.config import WorkerConfig
from desktop.workers.llamacpp.host import LlamaCppHost
from desktop.workers.llamacpp.plan import ServerPlan
from desktop.workers.process_host import ProcessHost
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.llama_server import LlamaServer
from desktop.workers.remote.spec import RemoteSpec
from desktop.workers.thread_host import ThreadHost

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "engine"))
from fake_host import FakeHost  # noqa: E402

TINY = ModelSpec("tiny")
CONFIG = WorkerConfig(num_slots=2)
LONG = SamplingParams(max_tokens=4000, ignore_eos=True)  # runs until stopped (the fake: until its timer)


class Sink:
    """Records what a host reports, from whichever thread it reports on."""

    def __init__(self) -> None:
        self.statuses: list[WorkerStatus] = []
        self.events: dict[str, list] = {}
        self.cond = threading.Condition()

    def __call__(self, worker_id: str, event) -> None:
        with self.cond:
            if isinstance(event, WorkerStatus):
                self.statuses.append(event)
            else:
                self.events.setdefault(event.request_id, []).append(event)
            self.cond.notify_all()

    def wait(self, pred: Callable[[], bool], timeout: float = 60.0) -> None:
        with self.cond:
            assert self.cond.wait_for(pred, timeout), "timed out waiting for the host"

    def terminal(self, rid: str, timeout: float = 60.0):
        self.wait(lambda: any(isinstance(e, TERMINAL) for e in self.events.get(rid, ())), timeout)
        time.sleep(0.05)  # anything after the terminal event would be a contract breach: let it arrive
        events = self.events[rid]
        assert sum(isinstance(e, TERMINAL) for e in events) == 1 and isinstance(events[-1], TERMINAL), events
        return events[-1]

    def up(self) -> WorkerStatus:
        self.wait(lambda: any(s.state is WorkerState.IDLE for s in self.statuses), 120)
        return next(s for s in self.statuses if s.state is WorkerState.IDLE)


KINDS = ["fake", "thread", "process", pytest.param("remote", marks=pytest.mark.real_model),
         "llamacpp"]  # a tiny GGUF written here, on the app's own llama.cpp child (workers/llamacpp)
_server: list[LlamaServer] = []  # one llama.cpp server for the module, started by the first remote host


@pytest.fixture(scope="module", autouse=True)
def llama_server():
    yield
    while _server:
        _server.pop().kill()


def make(kind: str) -> WorkerHost:
    if kind == "remote":
        if not _server:
            server = LlamaServer(ctx=512, slots=2, threads=1)
            server.start()
            _server.append(server)
        return RemoteHost("remote", RemoteSpec(_server[0].url))
    if kind == "llamacpp":
        from gguf_files import write_llama

        folder = tempfile.mkdtemp(prefix="omnidesk-gguf-")
        atexit.register(shutil.rmtree, folder, True)
        path = write_llama(pathlib.Path(folder) / "tiny-Q8_0.gguf", "Q8_0", std=0.3)
        return LlamaCppHost("llamacpp", str(path), ServerPlan(slots=2, threads=1))
    if kind == "fake":
        return FakeHost("fake", capacity=2, num_slots=2, auto=0.5, context_length=2048)
    if kind == "thread":
        return ThreadHost("thread", TINY, CONFIG, threads=1)
    return ProcessHost("process", TINY, CONFIG, threads=1)


@pytest.fixture(scope="module", params=KINDS)
def started(request):
    """One started host per kind for the module (a process host costs seconds to spawn)."""
    host, sink = make(request.param), Sink()
    host.start(sink)
    sink.up()
    yield request.param, host, sink
    host.close()


def test_start_reports_loading_then_idle_with_its_capacity(started):
    kind, host, sink = started
    states = [s.state for s in sink.statuses]
    assert states.index(WorkerState.LOADING) < states.index(WorkerState.IDLE)
    idle = sink.up()
    assert idle.worker_id == host.worker_id and idle.capacity >= 1 and idle.num_slots >= 1
    if kind != "fake":  # the fake has no model to name
        assert idle.model and idle.context_length > 0


def test_a_chat_streams_and_ends_with_exactly_one_done(started):
    kind, host, sink = started
    host.submit(Chat("c1", (Message("user", "Hello there"),), SamplingParams(max_tokens=6)))
    done = sink.terminal("c1")
    assert isinstance(done, Done), done
    chunks = [e.text_delta for e in sink.events["c1"] if isinstance(e, ChunkEvent)]
    assert "".join(chunks) == done.text
    assert done.stats.input_tokens > 0 and done.slots, "a Done carries its stats and the slot snapshot"


def test_stop_ends_a_running_request_and_an_unknown_stop_is_an_error(started):
    kind, host, sink = started
    host.submit(Chat("s1", (Message("user", "Tell me a long story"),), LONG))
    sink.wait(lambda: len(sink.events.get("s1", ())) >= 1)  # it has started
    host.submit(Stop("s1"))
    done = sink.terminal("s1")
    assert isinstance(done, Done) and done.stats.finish_reason in ("stopped", "cancelled"), done
    host.submit(Stop("nobody"))
    err = sink.terminal("nobody")
    assert isinstance(err, ErrorEvent) and err.code == "unknown_request"


def test_a_session_lives_through_create_append_generate_end(started):
    kind, host, sink = started
    host.submit(CreateSession("k1", "sess", "You are brief."))
    assert isinstance(sink.terminal("k1"), Done)
    host.submit(AppendInput("k2", "sess", (Message("user", "Hi"),)))
    assert isinstance(sink.terminal("k2"), Done)
    host.submit(Generate("k3", "sess", SamplingParams(max_tokens=4)))
    assert isinstance(sink.terminal("k3"), Done)
    host.submit(EndSession("k4", "sess"))
    assert isinstance(sink.terminal("k4"), Done)


def test_a_bad_request_is_answered_and_the_host_keeps_serving(started):
    kind, host, sink = started
    host.submit(Generate("b1", "no-such-session", SamplingParams(max_tokens=2)))
    err = sink.terminal("b1")
    assert isinstance(err, ErrorEvent) and err.code in ("unknown_session", "busy")
    host.submit(Chat("b2", (Message("user", "Still there?"),), SamplingParams(max_tokens=3)))
    assert isinstance(sink.terminal("b2"), Done)


@pytest.mark.parametrize("kind", KINDS)
def test_submit_never_blocks_and_close_fails_what_is_in_flight(kind):
    host, sink = make(kind), Sink()
    host.start(sink)
    sink.up()
    t0 = time.perf_counter()
    host.submit(Chat("f1", (Message("user", "A long one please"),), LONG))
    assert time.perf_counter() - t0 < 0.1, "submit blocked its caller"
    sink.wait(lambda: len(sink.events.get("f1", ())) >= 1)
    t0 = time.perf_counter()
    host.close(timeout=5.0)
    assert time.perf_counter() - t0 < 10.0, "close overran its timeout"
    err = sink.terminal("f1", timeout=5.0)
    assert isinstance(err, ErrorEvent), err
