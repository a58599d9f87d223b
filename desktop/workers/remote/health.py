"""The health checks of one remote server for its host's whole life: /health polled (every
`health_s` while up, with a growing backoff while not), what it serves asked again each time it
comes (back) up. Nothing a server says ends the loop; the host hears of each change."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

import httpx

from desktop.errors import REMOTE_UNREACHABLE as UNREACHABLE
from desktop.workers.remote.answers import Unusable
from desktop.workers.remote.outcome import UNUSABLE
from desktop.workers.remote.probe import ServerInfo, Unreachable, check_health, describe
from desktop.workers.remote.spec import RemoteSpec

log = logging.getLogger(__name__)


class HealthLoop:
    """`up`; while not up, `fault` (UNREACHABLE or UNUSABLE) and `why` (in words). `on_up(info)`
    when the server (again) serves; `on_down(fault, why, was_up)` once per change: unreachable once
    until it answers again (the reason may vary between checks), unusable once per reason."""

    def __init__(self, spec: RemoteSpec, health_s: float, backoff: tuple[float, float], timeout_s: float,
                 on_up: Callable[[ServerInfo], None], on_down: Callable[[str, str, bool], None]) -> None:
        self.spec, self.health_s, self.backoff, self.timeout_s = spec, health_s, backoff, timeout_s
        self.on_up, self.on_down = on_up, on_down
        self.up, self.fault, self.why = False, "", ""
        self._poke = asyncio.Event()  # a request met a dead connection: check now

    def poke(self) -> None:
        """Check now rather than at the next beat."""
        self._poke.set()

    async def run(self, client: httpx.AsyncClient) -> None:
        delay, first = self.backoff[0], True
        while True:
            info = None
            try:
                await asyncio.wait_for(check_health(client, self.spec), self.timeout_s)
                if not self.up:  # (back) up: ask again what it serves (it may have been restarted with another model)
                    info = await asyncio.wait_for(describe(client, self.spec), self.timeout_s)
                delay = self.backoff[0]
            except (Unreachable, asyncio.TimeoutError) as exc:
                if self.up or first or self.fault != UNREACHABLE:
                    self._down(UNREACHABLE, str(exc) or "no answer in time")
            except Unusable as exc:
                if self.fault != UNUSABLE or self.why != str(exc):
                    self._down(UNUSABLE, str(exc))
            except Exception as exc:  # a bug meeting an answer nobody foresaw: say so, check again later
                log.exception("Checking the remote server at %s failed", self.spec.url)
                reason = f"its answer could not be read ({type(exc).__name__}: {exc})"
                if self.fault != UNUSABLE or self.why != reason:
                    self._down(UNUSABLE, reason)
            if info is not None:  # apart from the server's answers: a bug of our own is not its fault
                self.up, self.fault, self.why = True, "", ""
                try:
                    self.on_up(info)
                except Exception as exc:  # the loop lives on, and the log and Admin say whose fault it is
                    log.exception("Taking the remote server at %s into use failed", self.spec.url)
                    self._down(UNUSABLE, f"Omnidesk could not take it into use ({type(exc).__name__}: {exc}); a bug")
            first = False
            self._poke.clear()
            try:
                await asyncio.wait_for(self._poke.wait(), self.health_s if self.up else delay)
            except asyncio.TimeoutError:
                pass
            if not self.up:
                delay = min(delay * 2, self.backoff[1])

    def _down(self, fault: str, why: str) -> None:
        was_up = self.up
        self.up, self.fault, self.why = False, fault, why
        self.on_down(fault, why, was_up)
