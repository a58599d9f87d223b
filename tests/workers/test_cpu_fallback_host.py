"""A GPU worker whose model fails to load hands over to a CPU worker: the app keeps a model, and
the status says why it runs on the CPU."""

from __future__ import annotations

import asyncio
import time

from desktop.gateway.gateway import Gateway
from desktop.model.loader import ModelSpec
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Done, WorkerHost, WorkerState, WorkerStatus
from desktop.workers.config import WorkerConfig
from desktop.workers.fallback_host import CpuFallback
from desktop.workers.thread_host import ThreadHost

OOM = "CUDA out of memory. Tried to allocate 2.00 GiB"


class FailingGpu(WorkerHost):
    """Loads, then fails the way a GPU without room does."""

    def __init__(self, code: str = "model_load") -> None:
        self.worker_id, self.code, self.closed, self.submitted = "gpu0", code, False, []

    def start(self, sink) -> None:
        sink(self.worker_id, WorkerStatus(self.worker_id, WorkerState.LOADING, "Loading…", device="cuda:0"))
        sink(self.worker_id, WorkerStatus(self.worker_id, WorkerState.ERROR, OOM, device="cuda:0", code=self.code))

    def submit(self, cmd) -> None:
        self.submitted.append(cmd)

    def close(self, timeout: float = 5.0) -> None:
        self.closed = True


def test_a_gpu_that_fails_to_load_falls_back_to_the_cpu_and_says_why():
    gpu = FailingGpu()
    made: list[WorkerHost] = []

    def cpu() -> WorkerHost:
        made.append(ThreadHost("cpu-x", ModelSpec("tiny"), WorkerConfig(num_slots=2), threads=1))
        return made[-1]

    host = CpuFallback(gpu, cpu)

    async def main() -> None:
        gw = Gateway([host])
        await gw.start()
        assert await gw.wait_ready(60)
        events = [e async for e in gw.chat([Message("user", "Still there?")], SamplingParams(max_tokens=4))]
        assert isinstance(events[-1], Done) and events[-1].stats.generated_tokens == 4
        await gw.close()

    asyncio.run(main())
    assert gpu.closed and host.fell_back and host.host is made[0] and len(made) == 1
    assert made[0].worker_id == "cpu-x"  # the CPU worker serves under the GPU worker's id
    assert host.worker_id == "gpu0"


def test_statuses_carry_the_notice_under_the_gpu_id():
    sink: list[tuple[str, object]] = []
    host = CpuFallback(FailingGpu("worker_crashed"), lambda: ThreadHost("cpu-x", ModelSpec("tiny"), WorkerConfig(num_slots=2), threads=1))
    host.start(lambda wid, ev: sink.append((wid, ev)))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(getattr(e, "state", None) is WorkerState.IDLE for _, e in sink):
            time.sleep(0.05)
    finally:
        host.close()
    statuses = [e for _, e in sink if isinstance(e, WorkerStatus)]
    assert {wid for wid, _ in sink} == {"gpu0"} and {s.worker_id for s in statuses} == {"gpu0"}
    assert not any(s.state is WorkerState.ERROR for s in statuses)  # the GPU's failure is not the app's
    switching = next(s for s in statuses if "Running on the CPU" in s.message)
    assert switching.state is WorkerState.LOADING and "out of memory" in switching.message
    idle = next(s for s in statuses if s.state is WorkerState.IDLE)
    assert "out of memory" in idle.message and idle.device == "cpu"


def test_a_gpu_that_loads_is_left_alone():
    class GoodGpu(FailingGpu):
        def start(self, sink) -> None:
            sink(self.worker_id, WorkerStatus(self.worker_id, WorkerState.IDLE, device="cuda:0"))
            sink(self.worker_id, WorkerStatus(self.worker_id, WorkerState.ERROR, "it stopped responding", code="worker_hung"))

    sink: list = []
    gpu = GoodGpu()
    host = CpuFallback(gpu, lambda: (_ for _ in ()).throw(AssertionError("no CPU worker is made")))
    host.start(lambda wid, ev: sink.append(ev))
    assert [s.state for s in sink] == [WorkerState.IDLE, WorkerState.ERROR]  # after it was up: its own restarts
    assert not host.fell_back and host.host is gpu
    host.close()
    assert gpu.closed
