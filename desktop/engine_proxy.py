"""Stands in for the engine of the moment (an EngineApi), so that pages built once keep working
across model reloads; while none runs, every call is refused with "not ready"."""

from __future__ import annotations

from typing import Any, Coroutine, Iterable

from desktop.errors import OmnideskError
from desktop.model.params import SamplingParams
from desktop.protocol.engine import EngineApi, Observer, RequestEvents
from desktop.protocol.engine_stats import EngineStats


class EngineProxy:
    """An EngineApi that forwards each call to `target` (the current gateway, or None). A call
    while there is none raises OmnideskError(code "not_ready", retryable) at once, before any
    awaiting: the async methods return the target's coroutine."""

    NOT_YET = "The model is not running yet; try again in a moment."

    def __init__(self) -> None:
        self.target: EngineApi | None = None
        self.absent = self.NOT_YET  # what a call hears while there is no target (the Models page's Unload sets it)

    def _engine(self) -> EngineApi:
        if self.target is None:
            raise OmnideskError(self.absent, code="not_ready", retryable=True)
        return self.target

    @property
    def observers(self) -> list[Observer]:
        return self._engine().observers

    def chat(self, messages: Iterable[Any], params: SamplingParams | dict | None = None, *,
             request_id: str | None = None, origin: str = "app", conversation: str = "",
             raw: bool = False, overflow: str = "slide") -> RequestEvents:
        return self._engine().chat(messages, params, request_id=request_id, origin=origin, conversation=conversation,
                                   raw=raw, overflow=overflow)

    def create_session(self, system: str | None = None, *, call: bool = False) -> Coroutine[Any, Any, str]:
        return self._engine().create_session(system, call=call)

    def pause_call(self, session_id: str, paused: bool) -> None:
        self._engine().pause_call(session_id, paused)

    def append_input(self, session_id: str, messages: Iterable[Any], draft: bool = False) -> RequestEvents:
        return self._engine().append_input(session_id, messages, draft)

    def generate_stream(self, session_id: str, params: SamplingParams | dict | None = None,
                        messages: Iterable[Any] | None = None) -> RequestEvents:
        return self._engine().generate_stream(session_id, params, messages)

    def truncate_reply(self, session_id: str, text: str) -> Coroutine[Any, Any, None]:
        return self._engine().truncate_reply(session_id, text)

    def cancel(self, request_id: str) -> Coroutine[Any, Any, None]:
        return self._engine().cancel(request_id)

    def end_session(self, session_id: str) -> Coroutine[Any, Any, None]:
        return self._engine().end_session(session_id)

    def wait_ready(self, timeout: float | None = None) -> Coroutine[Any, Any, bool]:
        return self._engine().wait_ready(timeout)

    def context_length(self) -> int:
        return self._engine().context_length()

    def stats(self) -> EngineStats:
        return self._engine().stats()
