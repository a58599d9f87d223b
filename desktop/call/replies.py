"""The assistant's side of a call turn, on the asyncio loop: the user's words (and the turn's
camera frames) go into the call's session, the reply is generated in the same breath and spoken
by the Voice as it streams; its text, first token and token counts go into the turn's metrics."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from desktop.call.events import CallEvent, TurnMetrics
from desktop.call.session import CallSession
from desktop.call.state import CallPhase
from desktop.call.turn_taking import TurnTaking
from desktop.call.utterance import Utterance
from desktop.call.video import VideoFeed, user_content
from desktop.errors import OmnideskError
from desktop.media.clock import Clock
from desktop.model.params import SamplingParams
from desktop.protocol import ChunkEvent, Done, ErrorEvent
from desktop.speech.reply_voice import ReplyVoice

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CallReply:
    """One reply of the call: its request, the task running it, its metrics."""

    request_id: str | None = None
    task: asyncio.Task | None = None
    metrics: TurnMetrics = field(default_factory=lambda: TurnMetrics(0))
    playback: tuple[float, int] | None = None  # the speaker's (starved_s, underruns) as the reply began


class Replies:
    """`run(text)` answers one user turn. `current`: the latest reply (what a cut and the voice's
    reports refer to); `turns`: every exchange's metrics, in order; `params`: the sampling of
    the replies (read at each turn)."""

    def __init__(self, session: CallSession, speaker: ReplyVoice, voice: Any, utterance: Utterance,
                 turn_taking: TurnTaking, clock: Clock, emit: Callable[[CallEvent], None], video: VideoFeed | None,
                 params: SamplingParams) -> None:  # fmt: skip
        self.session, self.speaker, self.voice, self.utterance = session, speaker, voice, utterance
        self.turn_taking, self.clock, self.emit, self.video, self.params = turn_taking, clock, emit, video, params
        self.current = CallReply()
        self.turns: list[TurnMetrics] = []

    async def run(self, text: str) -> None:
        _, asr_ms, end_t = self.utterance.last or (text, None, None)
        metrics = TurnMetrics(len(self.turns) + 1, text, end_t, asr_ms, transcript_t=self.clock.now(),
                              turn_end=self.turn_taking.state.turn_end)
        self.turns.append(metrics)
        reply = self.current = CallReply(metrics=metrics)
        reply.task = asyncio.current_task()
        state = self.turn_taking.state
        try:
            # both at once: the session runs them in order, so the reply needs no round trip between
            frames = self.video.take() if self.video is not None else []
            content = user_content(text, frames)
            metrics.images = len(frames)
            appended = self.session.append([{"role": "user", "content": content}])
            stream = self.session.generate(self.params)
            reply.request_id = stream.request_id
            try:
                await _drain(appended)
            except OmnideskError:  # the words did not go in: no reply to them
                await self.session.cancel(stream.request_id)
                raise
            if state.phase is not CallPhase.THINKING:  # cut while the input was read: not a word
                await self.session.cancel(stream.request_id)
                await _drain(stream)
                return
            self.speaker.begin(stream.request_id)
            async for event in stream:
                if isinstance(event, ChunkEvent) and event.text_delta:
                    if metrics.first_token_t is None:
                        metrics.first_token_t = self.clock.now()
                    metrics.assistant_text += event.text_delta
                    self.speaker.delta(stream.request_id, event.text_delta)
                    self.emit(CallEvent("assistant", event.text_delta))
                elif isinstance(event, Done):
                    s = event.stats
                    metrics.ttft_ms, metrics.cached_tokens, metrics.new_tokens = s.ttft_ms, s.cached_tokens, s.new_tokens
                    metrics.kv_tokens = s.input_tokens + s.generated_tokens
                elif isinstance(event, ErrorEvent):
                    raise OmnideskError(event.message, code=event.code)
            self.speaker.end(stream.request_id)
            if not getattr(self.voice, "available", True):  # no sound output: the text was the reply
                self.turn_taking.do(state.reply_finished)
        except OmnideskError as exc:
            log.warning("Call reply failed: %s", exc.message)
            self.emit(CallEvent("error", exc.message))
            if self.current is reply:
                self.turn_taking.do(state.reply_finished)
        finally:
            if metrics.heard is None:
                self.emit(CallEvent("metrics", metrics=metrics))


async def _drain(stream: Any) -> None:
    last = None
    async for event in stream:
        last = event
    if isinstance(last, ErrorEvent):
        raise OmnideskError(last.message, code=last.code, retryable=last.retryable)
