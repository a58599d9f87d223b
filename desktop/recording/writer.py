"""One session's recording (format v1): its folder, meta.json, timeline.jsonl and the audio, frame
and image files, written on the writer pool's lanes so that whoever records never waits on disk.
A file is complete on disk before its timeline line is written; a disk error stops the recording
with a plain warning and nothing else."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable

import numpy as np

from desktop.media.clock import Clock, RealClock
from desktop.recording.backlog import Backlog
from desktop.recording.disk import Disk
from desktop.recording.lanes import HOLD_MAX_S, Lane, WriterPool, shared_pool
from desktop.recording.media_writer import MediaWriter
from desktop.recording.paths import AI_AUDIO, FORMAT_VERSION, USER_AUDIO, USER_FRAMES, USER_IMAGES, new_folder
from desktop.recording.session_files import SessionFiles, plain_error
from desktop.recording.turns import TEXT_KINDS

__all__ = ["SessionRecorder", "live_folders", "plain_error"]
log = logging.getLogger(__name__)
MAX_PENDING_BYTES = 64 << 20  # audio/frames waiting for the disk; beyond it new chunks are dropped (noted)
FIRST_WORDS = 80

_live: dict[Path, SessionRecorder] = {}  # folders open in this process (retention leaves them alone)
_live_lock = threading.Lock()


def live_folders(recording_only: bool = False) -> set[Path]:
    """The folders of this process's open recorders; `recording_only`: less those stopped on an
    error or closing (what a user would call "being recorded now")."""
    with _live_lock:
        return {f for f, r in _live.items() if not recording_only or r.recording}


class SessionRecorder:
    """Records one session into `<root>/<stamp>-<kind>-<id8>/`. Every method returns at once (the
    work is queued on the writer pool). Times: `clock` is the one the caller's timestamps are on
    (a call's clock); the session starts at `clock.now()` (`t` = 0). `on_warning(message)` is
    called once, on a writer thread, when the recording had to stop (disk full, unwritable).
    `keep_empty=False`: a session in which nothing was said (no user or assistant text: a call
    hung up at once) is deleted when it closes (`discarded`), instead of listed as a recording.

    Its parts: SessionFiles (the folder's files, and the stop on a disk error), Backlog (file
    numbers and what waits for the disk) and MediaWriter (audio, frames and images)."""

    def __init__(self, root: Path, kind: str, *, title: str = "", model: str = "",
                 settings: dict[str, Any] | None = None, user_rate: int = 16000, ai_rate: int | None = None,
                 video: bool = False, clock: Clock | None = None, wall: Callable[[], float] = time.time,
                 pool: WriterPool | None = None, disk: Disk | None = None,
                 on_warning: Callable[[str], None] | None = None, max_pending: int = MAX_PENDING_BYTES,
                 keep_empty: bool = True) -> None:
        self.clock = clock = clock or RealClock()
        self.kind, self.disk = kind, disk or Disk()
        self.started_at = wall()
        self._t0 = t0 = self.clock.now()
        self.folder, self.id = new_folder(Path(root), kind, self.started_at)
        self.meta: dict[str, Any] = {
            "version": FORMAT_VERSION, "id": self.id, "type": kind, "title": title, "started_at": self.started_at,
            "ended_at": None, "model": model, "settings": dict(settings or {}), "first_words": "",
            "user_rate": int(user_rate), "ai_rate": int(ai_rate) if ai_rate else None, "video": bool(video),
            "replay": {"audio": None, "video": None},
        }
        self.pool = pool = pool or shared_pool()
        pool.start()
        self._timeline: Lane = pool.lane()
        self._lanes = {"user": pool.lane(), "ai": pool.lane(), "frame": pool.lane(), "image": pool.lane()}
        self._lock = threading.Lock()  # closing (callers are on several threads)
        self._closing: Future[SessionRecorder] | None = None
        self.keep_empty, self.said, self.discarded = keep_empty, 0, False
        self.files = SessionFiles(self.folder, kind, self.meta, self.disk, lambda: clock.now() - t0, on_warning)
        self.backlog = Backlog(pool, max_pending, lambda what: self.event(
            "note", text=f"Recording fell behind the disk; some {what} data was not saved."))
        self.media = MediaWriter(self.files, self._timeline, self.backlog)
        with _live_lock:
            _live[self.folder] = self
        self.files.open((USER_AUDIO, AI_AUDIO, USER_FRAMES, USER_IMAGES))

    # ------------------------------------------------------------------ time and state

    def now(self) -> float:
        """Seconds since the session started."""
        return self.clock.now() - self._t0

    def at(self, clock_t: float) -> float:
        """A time on the caller's clock as seconds since the session started."""
        return clock_t - self._t0

    @property
    def failed(self) -> str | None:
        """The warning, once the recording stopped on an error."""
        return self.files.failed

    @failed.setter
    def failed(self, message: str | None) -> None:
        self.files.failed = message

    @property
    def bytes_written(self) -> int:
        return self.files.bytes_written

    @property
    def recording(self) -> bool:
        return self.failed is None and self._closing is None

    # ------------------------------------------------------------------ what callers record

    def event(self, kind: str, t: float | None = None, **fields: Any) -> None:
        """A timeline line `{"t", "kind", **fields}` (t: session seconds, default now)."""
        if not self.recording:
            return
        if kind in TEXT_KINDS:  # a session with none of these is empty
            self.said += 1
        self._timeline.submit(self.files.append, {"t": round(self.now() if t is None else t, 4), "kind": kind, **fields})
        if kind == "user_text" and not self.meta["first_words"] and str(fields.get("text", "")).strip():
            words = " ".join(str(fields["text"]).split())
            self.meta["first_words"] = words[:FIRST_WORDS]
            self._timeline.submit(self.files.guarded, self.files.write_meta)

    def audio(self, track: str, blocks: list[np.ndarray], start: float, rate: int) -> None:
        """A chunk of a track ("user" | "ai"): float32 mono `blocks` at `rate`, starting at
        session seconds `start`; written as PCM_16 WAV at the track's rate, then listed."""
        nbytes = sum(b.nbytes for b in blocks)
        index = self._take(track, nbytes, sum(b.size for b in blocks) / rate)
        if index:
            self._lanes[track].submit(self.media.audio, track, index, blocks, start, rate, nbytes)

    def frame(self, image: np.ndarray, start: float) -> None:
        """A camera frame (BGR uint8, as opencv has it) at session seconds `start`, as a JPEG
        (copied: a capture may reuse its buffer)."""
        index = self._take("frame", image.nbytes, 0.0)
        if index:
            self._lanes["frame"].submit(self.media.frame, index, image.copy(), start, image.nbytes)

    def image(self, source: Path | bytes, turn: int, name: str = "image") -> None:
        """An image the user attached at `turn`: a file's path or its bytes, copied in."""
        index = self._take("image", 0, 0.0)
        if index:
            self._lanes["image"].submit(self.media.image, index, source, turn, name, self.now())

    def _take(self, what: str, nbytes: int, seconds: float) -> int:
        """The next file number for `what`, or 0 when the chunk is dropped (stopped, or too much
        waiting for the disk)."""
        return self.backlog.take(what, nbytes, seconds) if self.recording else 0

    def update_meta(self, **fields: Any) -> None:
        """Change meta.json fields (written on the timeline lane)."""
        if self.failed is None:
            self.meta.update(fields)
            self._timeline.submit(self.files.guarded, self.files.write_meta)

    def hold(self, max_s: float = HOLD_MAX_S) -> None:
        """Keep the writer pool idle for at most `max_s` (a call's reply is on its way): what is
        handed over meanwhile waits, in order. An audio chunk ends the hold (it is written at once,
        so a crash still loses at most the last chunk); one frame may wait, a second ends it."""
        self.pool.hold(max_s)

    def release(self) -> None:
        """The writers may run again (the reply's first audio is out)."""
        self.pool.release()

    # ------------------------------------------------------------------ the end

    def close(self) -> Future[SessionRecorder]:
        """End the session: everything queued is written, then `end`, then meta's `ended_at`.
        Returns at once; the future is done when the folder is complete (on its own thread,
        so that it never holds a writer thread while waiting for the others)."""
        with self._lock:
            if self._closing is not None:
                return self._closing
            fut = self._closing = Future()
        threading.Thread(target=self._finish, args=(fut,), name="omnidesk-rec-close", daemon=True).start()
        return fut

    def _finish(self, fut: Future[SessionRecorder]) -> None:
        try:
            for lane in self._lanes.values():
                lane.wait()
            def end() -> None:
                self.files.append({"t": round(self.now(), 4), "kind": "end"})
                self.meta["ended_at"] = self.started_at + self.now()
                self.files.guarded(self.files.write_meta)

            if self.failed is None:
                self._timeline.submit(end)
                self._timeline.wait()
            else:
                self._timeline.wait()
                self.meta["ended_at"] = self.started_at + self.now()
            self.files.close()
            if not self.keep_empty and self.said == 0:
                self._discard()
        finally:
            with _live_lock:
                _live.pop(self.folder, None)
            fut.set_result(self)

    def _discard(self) -> None:
        """Delete the folder of a session in which nothing was said (never a link, never outside)."""
        if self.folder.is_symlink() or not self.folder.is_dir():
            return
        try:
            shutil.rmtree(self.folder)
        except OSError as exc:
            log.warning("An empty recording could not be removed (%s): %s", self.folder, exc)
            return
        self.discarded = True
        log.info("Nothing was said in %s: not kept", self.folder.name)
