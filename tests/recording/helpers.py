"""Small helpers of the recording tests: a disk that fails, and a chat reply as the chat hook sees it."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desktop.chat.conversations import Conversation, StoredMessage
from desktop.recording.disk import Disk


class FullDisk(Disk):
    """Takes `room` file writes (chunks, meta), then fails every write with ENOSPC, as a full disk does."""

    def __init__(self, room: int = 0, err: int = errno.ENOSPC) -> None:
        self.room, self.err, self.failures = room, err, 0

    def _spend(self) -> None:
        if self.room <= 0:
            self.failures += 1
            raise OSError(self.err, os.strerror(self.err))
        self.room -= 1

    def write_file(self, path: Path, data: bytes) -> None:
        self._spend()
        super().write_file(path, data)

    def append_line(self, f, line: str) -> None:
        if self.room <= 0:
            self.failures += 1
            raise OSError(self.err, os.strerror(self.err))
        super().append_line(f, line)


@dataclass
class FakeReply:
    """What ChatRecording reads of an engine Reply: conv, at, continuing, text, stats, error, listeners."""

    conv: Conversation
    continuing: bool = False
    text: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    error: tuple[str, str, bool] | None = None
    listeners: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.conv.messages.append(StoredMessage("assistant", ""))
        self.at = len(self.conv.messages) - 1

    def stream(self, *parts: str, stats: dict[str, Any] | None = None, failed: str | None = None) -> None:
        for part in parts:
            self.text += part
            for listener in list(self.listeners):
                listener(self, "text")
        self.stats = stats or {}
        self.error = ("boom", failed, False) if failed else None
        for listener in list(self.listeners):
            listener(self, "failed" if failed else "done")
