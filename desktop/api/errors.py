"""Errors as OpenAI's clients expect them: `{"error": {message, type, param, code}}` with the HTTP
status that says what went wrong, mapped from the engine's OmnideskError codes."""

from __future__ import annotations

import math
from typing import Any

from fastapi.responses import JSONResponse

from desktop.errors import OmnideskError

# engine error code → (HTTP status, OpenAI error type)
STATUS: dict[str, tuple[int, str]] = {
    "invalid_request": (400, "invalid_request_error"),
    "context_length_exceeded": (400, "invalid_request_error"),
    "unknown_session": (400, "invalid_request_error"),
    "unknown_request": (400, "invalid_request_error"),
    "invalid_api_key": (401, "invalid_request_error"),
    "not_found": (404, "invalid_request_error"),
    "method_not_allowed": (405, "invalid_request_error"),
    "queue_full": (429, "rate_limit_error"),
    "busy": (429, "rate_limit_error"),
    "model_not_loaded": (503, "server_error"),
    "not_ready": (503, "server_error"),
    "model_load": (503, "server_error"),
    "worker_crashed": (503, "server_error"),
    "worker_hung": (503, "server_error"),
    "worker_removed": (503, "server_error"),
    "shutdown": (503, "server_error"),
}


class ApiError(Exception):
    """An error to answer with: a status, OpenAI's error object, and headers (Retry-After)."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        if self.retry_after_s is None:
            return {}
        return {"Retry-After": str(max(1, math.ceil(self.retry_after_s)))}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers())


def from_engine(code: str, message: str, *, retry_after_s: float | None = None) -> ApiError:
    """The ApiError for an engine error code (an OmnideskError's or an ErrorEvent's); unknown → 500."""
    status, kind = STATUS.get(code, (500, "server_error"))
    return ApiError(status, message, type=kind, code=code,
                    retry_after_s=retry_after_s if status in (429, 503) else None)


def from_exception(err: OmnideskError, *, retry_after_s: float | None = None) -> ApiError:
    return from_engine(err.code, err.message, retry_after_s=retry_after_s)


def no_model(loading: bool) -> ApiError:
    """503 while no model can answer: loading (retry soon) or none loaded (failed or stopped)."""
    if loading:
        return ApiError(503, "The model is still loading; try again in a moment.", type="server_error",
                        code="model_not_loaded", retry_after_s=5)
    return ApiError(503, "No model is loaded in Omnidesk; open the app and choose a model.",
                    type="server_error", code="model_not_loaded")
