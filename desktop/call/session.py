"""The call's one gateway session, open for the whole call (its KV grows turn by turn): the
user's words go in, replies are generated and cancelled, a cut reply is trimmed to what was
heard, and the session ends with the call."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from desktop.call.tasks import CallTasks
from desktop.errors import OmnideskError
from desktop.model.params import SamplingParams
from desktop.protocol.engine import EngineApi

log = logging.getLogger(__name__)


class CallSession:
    """`id` is None until `open` (and when the gateway refused it)."""

    def __init__(self, gateway: EngineApi, tasks: CallTasks) -> None:
        self.gateway, self.tasks = gateway, tasks
        self.id: str | None = None
        # Who sends to the session, in order (on the call's loop): a cut holds it from its
        # cancel to its trim, so no draft of the user's next words goes in between.
        self.lane = asyncio.Lock()

    async def open(self, system: str | None) -> None:
        self.id = await self.gateway.create_session(system, call=True)

    def append(self, messages: list[dict[str, Any]], draft: bool = False) -> Any:
        """The stream of appending `messages` to the session (not awaited here); `draft`: the
        user's words so far, which the next input replaces."""
        return self.gateway.append_input(self.id, messages, draft)

    def generate(self, params: SamplingParams, messages: list[dict[str, Any]] | None = None) -> Any:
        """The stream of the next reply, `messages` (the user's final words) appended first by the
        same command."""
        return self.gateway.generate_stream(self.id, params, messages)

    async def cancel(self, request_id: str) -> None:
        try:
            await self.gateway.cancel(request_id)
        except OmnideskError:
            pass  # it ended meanwhile

    async def truncate(self, heard: str) -> None:
        """The assistant's last turn becomes `heard` (OmnideskError: nothing to trim)."""
        await self.gateway.truncate_reply(self.id, heard)

    def mark_paused(self, paused: bool) -> None:
        """Tell the gateway (on the call's loop) that the call is paused or back, where it cares."""
        mark = getattr(self.gateway, "pause_call", None)
        if mark is not None and self.id is not None:
            self.tasks.call_soon(mark, self.id, paused)

    async def end(self) -> None:
        if self.id is not None:
            try:
                await self.gateway.end_session(self.id)
            except OmnideskError as exc:
                log.info("Ending the call's session: %s", exc.message)
