"""What the model sees of a video call: while the camera is on, its newest frame is taken at
`rate_hz` (1 per second by default, the seed demo's rate) as a JPEG, kept until the user's turn
ends, and attached to that turn's message as image parts (the newest `per_turn` of them). The
call's session keeps every image it was given (append-only, in the KV cache), so the call sends
at most `max_in_context` in all; past that the camera still shows on the page, and `limit_hit`
says why the model no longer gets new frames."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable

RATE_HZ = 1.0
PER_TURN = 2
MAX_IN_CONTEXT = 16
MAX_SIDE = 448  # pixels: the longer side of a frame sent to the model (the processor resizes again)


class VideoFeed:
    """`tick(now)` from the call's media thread; `take()` when the user's turn ends; `camera` (with
    `latest()`) is set when the user turns the camera on; `on`: frames are sampled (off: nothing
    is taken, frames kept so far are dropped); `send`: the model gets them (a model that cannot
    see images does not). `taps` get each sampled VideoFrame (a recording), on the media thread."""

    def __init__(self, camera: Any = None, rate_hz: float = RATE_HZ, per_turn: int = PER_TURN,
                 max_in_context: int = MAX_IN_CONTEXT, max_side: int = MAX_SIDE) -> None:  # fmt: skip
        if rate_hz <= 0 or per_turn < 1 or max_in_context < 0:
            raise ValueError("rate_hz > 0, per_turn >= 1 and max_in_context >= 0 are required")
        self.camera, self.rate_hz, self.per_turn = camera, rate_hz, per_turn
        self.max_in_context, self.max_side = max_in_context, max_side
        self._frames: deque[bytes] = deque(maxlen=per_turn)
        self._next_t: float | None = None
        self._last_index = -1
        self._lock = threading.Lock()
        self._on = False
        self.send = True
        self.taps: list[Callable[[Any], None]] = []
        self.sent = 0  # images given to the session so far
        self.taken = 0  # frames sampled so far

    @property
    def on(self) -> bool:
        return self._on

    @on.setter
    def on(self, value: bool) -> None:
        with self._lock:
            self._on = bool(value)
            if not self._on:
                self._frames.clear()
                self._next_t = None

    @property
    def limit_hit(self) -> bool:
        return self.sent >= self.max_in_context

    def tick(self, now: float) -> None:
        """Take the camera's newest frame if one is due (and new since the last one)."""
        if not self._on or self.camera is None or self.limit_hit or (self._next_t is not None and now < self._next_t):
            return
        frame = self.camera.latest()
        if frame is None or frame.index == self._last_index:
            return
        for tap in list(self.taps):
            tap(frame)
        data = frame.jpeg(max_side=self.max_side) if self.send else b""  # ~2 ms for 640×480
        with self._lock:
            if not self._on:
                return
            if data:
                self._frames.append(data)
            self._last_index = frame.index
            self.taken += 1
            self._next_t = (now if self._next_t is None else max(self._next_t, now - 1.0 / self.rate_hz)) + 1.0 / self.rate_hz

    def take(self) -> list[bytes]:
        """The frames for the turn that just ended (newest last), within the call's limit."""
        with self._lock:
            room = max(self.max_in_context - self.sent, 0)
            frames = list(self._frames)[-room:] if room else []
            self._frames.clear()
            self.sent += len(frames)
            return frames


def user_content(text: str, frames: list[bytes]) -> str | list[dict[str, Any]]:
    """A user turn's message content: its text, with the turn's frames as image parts first."""
    if not frames:
        return text
    return [*({"type": "image", "image": f} for f in frames), {"type": "text", "text": text}]
