"""The app's recordings, as the composition root wires them (no Qt): records a call or the chats
when the settings say so, builds each finished call's replay files in the background with
progress, and applies retention at start and every hour."""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from desktop.recording.call_hook import CallRecording
from desktop.recording.chat_hook import ChatRecording
from desktop.recording.lanes import WriterPool, shared_pool
from desktop.recording.paths import default_root
from desktop.recording.replay import build_replay
from desktop.recording.retention import Freed, apply_retention
from desktop.recording.writer import SessionRecorder, live_folders
from desktop.settings import Settings

log = logging.getLogger(__name__)
AI_RATE_MAX = 24000  # the speaker plays at 48 kHz; speech needs no more than this
RETENTION_EVERY_S = 3600.0
RECORDING = "● Recording"

Status = Callable[[str], None]


class Recordings:
    """`settings()` is read whenever a session starts. `status(text)` gets short progress lines
    (replay building) on any thread. `root`: the recordings folder (tests give tmp_path).
    `model()`: the loaded model's name as the app shows it (None: none loaded; the settings' model
    source is written then). `voice()`: the chat's Voice, whose spoken replies a chat recording
    keeps. A session in which nothing was said is not kept."""

    def __init__(self, settings: Callable[[], Settings], root: Path | None = None, *,
                 pool: WriterPool | None = None, status: Status | None = None,
                 model: Callable[[], str | None] = lambda: None, voice: Callable[[], Any] = lambda: None) -> None:
        self.settings, self.root = settings, Path(root) if root is not None else default_root()
        self.pool, self.status, self.model = pool or shared_pool(), status or (lambda text: None), model
        self.chats = ChatRecording(self._open_chat, lambda: self.settings().record_chats, voice=voice)
        self._replays = ThreadPoolExecutor(1, thread_name_prefix="omnidesk-replay")  # one at a time, in order
        self.last_freed: Freed | None = None
        self._stopping = threading.Event()  # the app is closing: a replay being built gives up

    # ------------------------------------------------------------------ sessions

    def live(self) -> set[Path]:
        """The folders under `root` being recorded now, by this app (a folder left unfinished by
        an earlier run that crashed is not among them, nor one stopped by a disk error). Cheap:
        read from memory, any thread."""
        return {f for f in live_folders(recording_only=True) if f.parent == self.root}

    def model_name(self) -> str:
        return self.model() or self.settings().model_source

    def record_call(self, call: Any, speaker: Any, *, model: str = "",
                    on_state: Callable[[str], None] | None = None) -> CallRecording | None:
        """Record `call` (started, its media thread not yet running) when calls are recorded.
        `on_state(text)`: RECORDING now, a plain warning if the disk fails, "" when it ends."""
        s = self.settings()
        if not s.recording_enabled:
            return None
        state = on_state or (lambda text: None)
        rate = int(getattr(speaker, "device_rate", 0) or 0)
        rec = SessionRecorder(
            self.root, "call", title="Voice call", model=model or self.model_name(), clock=call.clock,
            pool=self.pool,
            settings={"call_mode": call.state.mode.value, "tts_engine": s.tts_engine, "tts_voice": s.tts_voice,
                      "audio_input_device": s.audio_input_device},
            user_rate=int(getattr(call.mic, "sample_rate", 16000)), ai_rate=min(rate, AI_RATE_MAX) if rate else None,
            on_warning=state, keep_empty=False)
        if rec.failed is not None:
            return None  # the warning went out already
        recording = CallRecording(rec, mic_rate=rec.meta["user_rate"],
                                  on_closed=lambda r: (state(""), r.discarded or self.build_replay(r.folder)))
        recording.attach(call, speaker)
        state(RECORDING)
        return recording

    def _open_chat(self, title: str) -> SessionRecorder:
        s = self.settings()
        return SessionRecorder(self.root, "chat", title=title, model=self.model_name(), pool=self.pool,
                               settings={"temperature": s.temperature, "max_tokens": s.max_tokens},
                               on_warning=self.status, keep_empty=False)

    def build_replay(self, folder: Path) -> None:
        """Build `folder`'s replay files in the background, reporting progress through `status`."""
        def run() -> None:
            last = [-1]

            def progress(f: float) -> None:
                if self._stopping.is_set():
                    raise ReplayCancelled
                pct = int(f * 100) // 10 * 10
                if pct != last[0]:
                    last[0] = pct
                    self.status(f"Building the call's replay… {pct} %")

            try:
                build_replay(folder, progress=progress)
                self.status("The call's replay is ready (Recordings).")
            except ReplayCancelled:
                log.info("The replay of %s was left unbuilt (closing)", folder)
            except Exception as exc:  # a broken session must not stop the next one's replay
                log.warning("The replay of %s could not be built: %s", folder, exc)
                self.status(f"The call's replay could not be built: {exc}")

        self._replays.submit(run)

    # ------------------------------------------------------------------ retention

    def clean_up(self) -> Freed:
        """Apply the retention settings now (slow on a big folder: call it off the UI thread)."""
        s = self.settings()
        freed = self.last_freed = apply_retention(self.root, s.retention_days, s.max_storage_gb)
        if freed.count:
            self.status(freed.message(s.retention_days, s.max_storage_gb))
        return freed

    async def idle_chats_loop(self, every_s: float = 60.0) -> None:
        """End the chat sessions idle for ChatRecording's limit, without waiting for the next
        reply (a task the composition owns and cancels; on the replies' loop)."""
        while True:
            await asyncio.sleep(every_s)
            self.chats.close_idle()

    async def retention_loop(self, every_s: float = RETENTION_EVERY_S) -> None:
        """Clean up now and then every `every_s` (a task the composition owns and cancels)."""
        while True:
            try:
                await asyncio.to_thread(self.clean_up)
            except Exception:
                log.exception("recordings clean-up failed")
            await asyncio.sleep(every_s)

    def close(self, timeout: float = 5.0) -> None:
        """End the chat sessions (their last lines written) and let running replays finish."""
        for fut in self.chats.close_all():
            try:
                fut.result(timeout)
            except Exception:
                log.warning("A chat recording did not close in time")
        self._stopping.set()
        self._replays.shutdown(wait=False, cancel_futures=True)


class ReplayCancelled(Exception):
    """Raised from a replay's progress callback to stop building it."""
