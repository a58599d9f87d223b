"""The engine's front door as its users see it (the chat reply, the call, the chat page, the
local API, the admin monitor): stateless chats, stateful sessions, cancel and stats. The gateway
is the one engine; tests drive the users with fakes that offer the same methods."""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable, Iterable, Protocol, runtime_checkable

from desktop.model.params import SamplingParams
from desktop.protocol.engine_stats import EngineStats
from desktop.protocol.events import Done, ErrorEvent, Event


@runtime_checkable
class RequestEvents(Protocol):
    """The events of one request in order, ending after its Done or ErrorEvent. The request runs
    whether or not anyone iterates."""

    request_id: str

    def __aiter__(self) -> AsyncIterator[Event]: ...

    async def __anext__(self) -> Event: ...

    async def aclose(self) -> None:
        """Stop listening; a request that has not ended is cancelled."""


Observer = Callable[[Any, "Done | ErrorEvent"], None]
"""Called with each user request's record (its `cmd`, `origin`, …) and its terminal event."""


@runtime_checkable
class EngineApi(Protocol):
    """What every user of the engine may call. Call it on the loop the engine runs on. Refusals
    at the door raise (QueueFullError, UnknownSession, InvalidRequest, ModelLoadError); an
    admitted request ends with exactly one Done or ErrorEvent on its stream."""

    @property
    def observers(self) -> list[Observer]:
        """Told of every user request that ended (e.g. /metrics); one that raises is only logged."""

    def chat(self, messages: Iterable[Any], params: SamplingParams | dict | None = None, *,
             request_id: str | None = None, origin: str = "app", conversation: str = "",
             raw: bool = False, overflow: str = "slide") -> RequestEvents:
        """A stateless turn over the whole conversation, routed to the worker that caches it.
        `origin` names the sender in stats() ("app", "api"); `conversation`, the saved
        conversation it belongs to ("" for none); `raw`, a completion's prompt (one message,
        no chat template); `overflow`, past the model's window: "slide" (the oldest messages
        leave the model's view) or "error"."""

    async def create_session(self, system: str | None = None, *, call: bool = False) -> str:
        """Open a session pinned to one worker and prefill `system`; `call`: a voice call's."""

    def pause_call(self, session_id: str, paused: bool) -> None:
        """A call's session was paused or resumed."""

    def append_input(self, session_id: str, messages: Iterable[Any], draft: bool = False) -> RequestEvents:
        """Append messages to a session and prefill them. `draft`: provisional (the user's words
        while they speak); the session's next input replaces them, prefilling only what differs;
        no messages with `draft` withdraws the draft."""

    def generate_stream(self, session_id: str, params: SamplingParams | dict | None = None,
                        messages: Iterable[Any] | None = None) -> RequestEvents:
        """Generate the session's reply from what was appended so far; `messages` (the user's
        final words, in place of a draft) are appended first, by the same command."""

    async def truncate_reply(self, session_id: str, text: str) -> None:
        """The session's last reply becomes `text`, what the user heard of it ("" drops it)."""

    async def cancel(self, request_id: str) -> None:
        """End a queued or running request (UnknownRequest when it is neither)."""

    async def end_session(self, session_id: str) -> None:
        """Close a session and free its KV; ending it again does nothing."""

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until no worker is still loading; True when at least one is up."""

    def context_length(self) -> int:
        """The longest context (tokens) a worker has reported; 0 until one is up."""

    def stats(self) -> EngineStats:
        """Workers, slots, queue, request counts and routing at this moment."""
