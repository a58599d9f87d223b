"""Cutting the call's reply (a barge-in, the listen button, a pause, hanging up): the speaker is
silent at once, on whichever thread asked; then, on the loop, the generation is cancelled (the
KV stays) and the assistant's turn in the session is trimmed to what the user heard."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from desktop.call.duck import Ducker
from desktop.call.events import CallEvent
from desktop.call.replies import CallReply, Replies
from desktop.call.session import CallSession
from desktop.call.tasks import CallTasks
from desktop.errors import OmnideskError
from desktop.speech.reply_voice import ReplyVoice

log = logging.getLogger(__name__)


class ReplyCut:
    def __init__(self, replies: Replies, session: CallSession, speaker: ReplyVoice, voice: Any, ducker: Ducker,
                 tasks: CallTasks, emit: Callable[[CallEvent], None]) -> None:  # fmt: skip
        self.replies, self.session, self.speaker, self.voice = replies, session, speaker, voice
        self.ducker, self.tasks, self.emit = ducker, tasks, emit

    def stop(self, reason: str) -> None:
        """Silence now (any thread); cancel and trim the context on the loop."""
        reply = self.replies.current
        if reply.request_id is not None:
            self.speaker.drop(reply.request_id)  # the speaker is silent within one audio block
        self.ducker.release()  # the reply is gone: the next one plays at full volume
        self.tasks.spawn(self._cut(reply, reason))

    async def _cut(self, reply: CallReply, reason: str) -> None:
        # The session's lane from the cancel to the trim: drafts of the user's next words (a
        # barge-in's come at once) go in after the trim, never between. This task starts before
        # any of theirs, and after the reply's own run, which takes the lane only to send.
        async with self.session.lane:
            if reply.request_id is not None:
                await self.session.cancel(reply.request_id)
            if reply.task is not None and reply.task is not asyncio.current_task():
                await asyncio.gather(reply.task, return_exceptions=True)
            if reply.request_id is None:
                return
            heard = self.voice.heard(reply.request_id)
            reply.metrics.heard = heard
            try:
                await self.session.truncate(heard)
            except OmnideskError as exc:  # nothing generated yet, or the session is gone
                log.info("Nothing truncated after a %s: %s", reason, exc.message)
        self.emit(CallEvent("cut", heard, reason=reason))
        self.emit(CallEvent("metrics", metrics=reply.metrics))
