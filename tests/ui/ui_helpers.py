"""Helpers shared by the UI tests: a started gateway over the tiny model."""

from __future__ import annotations


def start_gateway(aloop, config=None, model: str = "tiny"):
    """A started gateway over one tiny-model thread worker (`config`: its WorkerConfig; `model`:
    "tiny-vlm" for the tiny vision model)."""
    from desktop.gateway.gateway import Gateway
    from desktop.model.loader import ModelSpec
    from desktop.workers.config import WorkerConfig
    from desktop.workers.thread_host import ThreadHost

    gw = Gateway([ThreadHost("w0", ModelSpec(model), config or WorkerConfig(num_slots=2), threads=1)])

    async def up() -> None:
        await gw.start()
        assert await gw.wait_ready(60)

    aloop.run(up())
    return gw
