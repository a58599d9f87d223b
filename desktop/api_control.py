"""Runs the local API for the app (part of the composition root): one Metrics for the app's
life, fed by every gateway the app builds, and one ApiServer started, restarted or stopped as
the settings say, serving whatever engine is current (503 while none is)."""

from __future__ import annotations

import logging
from typing import Callable

from desktop.api.app import Engine, make_app
from desktop.api.metrics import Live, Metrics
from desktop.api.server import ApiServer, ApiState, ApiStatus
from desktop.protocol.engine import EngineApi
from desktop.settings import Settings

log = logging.getLogger(__name__)


class ApiControl:
    """`engine()`: the Engine to serve with now, or None; `loading()`: whether a model is on its
    way; `live()`: the engine's gauges for /metrics. Call everything on the app's loop."""

    def __init__(self, engine: Callable[[], Engine | None], loading: Callable[[], bool],
                 live: Callable[[], Live | None]) -> None:
        self.metrics = Metrics(live)
        self.server = ApiServer(lambda key, local_only: make_app(engine, key=key, loading=loading, metrics=self.metrics,
                                                                 local_only=local_only))
        self._wanted: tuple[str, int, str | None] | None = None

    @property
    def status(self) -> ApiStatus:
        return self.server.status

    def watch(self, gateway: EngineApi) -> None:
        """A new gateway: its requests count in /metrics too."""
        gateway.observers.append(self.metrics.observe)

    async def apply(self, settings: Settings) -> ApiStatus:
        """Start, restart or stop the server when its settings changed (or retry after a failure:
        the user may have freed the port)."""
        wanted = (settings.api_host, settings.api_port, settings.api_key) if settings.api_server_enabled else None
        failed = self.status.state in (ApiState.PORT_IN_USE, ApiState.ERROR)
        if wanted == self._wanted and not failed:
            return self.status
        self._wanted = wanted
        if wanted is None:
            return await self.server.stop()
        return await self.server.start(*wanted)

    async def close(self) -> None:
        self._wanted = None
        await self.server.stop()
