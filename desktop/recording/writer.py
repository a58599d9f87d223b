"""One session's recording (format v1): its folder, meta.json, timeline.jsonl and the audio, frame
and image files, written on the writer pool's lanes so that whoever records never waits on disk.
A file is complete on disk before its timeline line is written; a disk error stops the recording
with a plain warning and nothing else."""

from __future__ import annotations

import errno
import io
import json
import logging
import shutil
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable

import numpy as np

from desktop.media.clock import Clock, RealClock
from desktop.recording.disk import Disk
from desktop.recording.lanes import HOLD_MAX_S, Lane, WriterPool, shared_pool
from desktop.recording.paths import (
    AI_AUDIO, FORMAT_VERSION, META, TIMELINE, USER_AUDIO, USER_FRAMES, USER_IMAGES, chunk_name, new_folder,
)
from desktop.recording.turns import TEXT_KINDS

log = logging.getLogger(__name__)
MAX_PENDING_BYTES = 64 << 20  # audio/frames waiting for the disk; beyond it new chunks are dropped (noted)
FIRST_WORDS = 80
JPEG_QUALITY = 85
TRACKS = {"user": USER_AUDIO, "ai": AI_AUDIO}
_GROUP = {"user": "audio", "ai": "audio", "frame": "frame"}
# What a hold lets wait. An audio chunk never waits: a kill just as a second one came would lose
# both (the waiting one could not be written in time), so a chunk ends the hold; one frame may.
WAITING_MAX = {"audio": 0, "frame": 1}

_live: dict[Path, SessionRecorder] = {}  # folders open in this process (retention leaves them alone)
_live_lock = threading.Lock()


def live_folders(recording_only: bool = False) -> set[Path]:
    """The folders of this process's open recorders; `recording_only`: less those stopped on an
    error or closing (what a user would call "being recorded now")."""
    with _live_lock:
        return {f for f, r in _live.items() if not recording_only or r.recording}


def plain_error(exc: OSError, folder: Path, what: str) -> str:
    """A disk error as the user reads it: what stopped, why, and that the session goes on."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        why = "the disk is full"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = f"the folder {folder.parent} cannot be written to"
    else:
        why = f"it could not be written to {folder.parent} ({exc.strerror or exc})"
    return f"Recording stopped: {why}. The {what} goes on; what was recorded so far is kept."


class SessionRecorder:
    """Records one session into `<root>/<stamp>-<kind>-<id8>/`. Every method returns at once (the
    work is queued on the writer pool). Times: `clock` is the one the caller's timestamps are on
    (a call's clock); the session starts at `clock.now()` (`t` = 0). `on_warning(message)` is
    called once, on a writer thread, when the recording had to stop (disk full, unwritable).
    `keep_empty=False`: a session in which nothing was said (no user or assistant text: a call
    hung up at once) is deleted when it closes (`discarded`), instead of listed as a recording."""

    def __init__(self, root: Path, kind: str, *, title: str = "", model: str = "",
                 settings: dict[str, Any] | None = None, user_rate: int = 16000, ai_rate: int | None = None,
                 video: bool = False, clock: Clock | None = None, wall: Callable[[], float] = time.time,
                 pool: WriterPool | None = None, disk: Disk | None = None,
                 on_warning: Callable[[str], None] | None = None, max_pending: int = MAX_PENDING_BYTES,
                 keep_empty: bool = True) -> None:
        self.clock = clock or RealClock()
        self.kind, self.disk, self.on_warning, self.max_pending = kind, disk or Disk(), on_warning, max_pending
        self.started_at = wall()
        self._t0 = self.clock.now()
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
        self._count = {"user": 0, "ai": 0, "frame": 0, "image": 0}
        self._lock = threading.Lock()  # counts and pending bytes (callers are on several threads)
        self._pending = 0
        self._waiting = {"audio": 0, "frame": 0}  # chunks and frames handed over, not yet written
        self._dropped: dict[str, float] = {}
        self._file: Any = None
        self._streams: dict[str, Any] = {}  # track → ((soxr stream, its input rate), where its input ended)
        self._closing: Future[SessionRecorder] | None = None
        self.failed: str | None = None  # the warning, once the recording stopped on an error
        self.bytes_written = 0
        self.keep_empty, self.said, self.discarded = keep_empty, 0, False
        with _live_lock:
            _live[self.folder] = self
        try:  # a few mkdirs and one small file: at the session's start, never in its loop
            for sub in (USER_AUDIO, AI_AUDIO, USER_FRAMES, USER_IMAGES):
                self.disk.makedirs(self.folder / sub)
            self._write_meta()
            self._file = self.disk.open_append(self.folder / TIMELINE)
        except OSError as exc:
            self._fail(exc)

    # ------------------------------------------------------------------ time

    def now(self) -> float:
        """Seconds since the session started."""
        return self.clock.now() - self._t0

    def at(self, clock_t: float) -> float:
        """A time on the caller's clock as seconds since the session started."""
        return clock_t - self._t0

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
        self._timeline.submit(self._append, {"t": round(self.now() if t is None else t, 4), "kind": kind, **fields})
        if kind == "user_text" and not self.meta["first_words"] and str(fields.get("text", "")).strip():
            words = " ".join(str(fields["text"]).split())
            self.meta["first_words"] = words[:FIRST_WORDS]
            self._timeline.submit(self._guarded, self._write_meta)

    def audio(self, track: str, blocks: list[np.ndarray], start: float, rate: int) -> None:
        """A chunk of a track ("user" | "ai"): float32 mono `blocks` at `rate`, starting at
        session seconds `start`; written as PCM_16 WAV at the track's rate, then listed."""
        nbytes = sum(b.nbytes for b in blocks)
        index = self._take(track, nbytes, sum(b.size for b in blocks) / rate)
        if index:
            self._lanes[track].submit(self._write_audio, track, index, blocks, start, rate, nbytes)

    def frame(self, image: np.ndarray, start: float) -> None:
        """A camera frame (BGR uint8, as opencv has it) at session seconds `start`, as a JPEG
        (copied: a capture may reuse its buffer)."""
        index = self._take("frame", image.nbytes, 0.0)
        if index:
            self._lanes["frame"].submit(self._write_frame, index, image.copy(), start, image.nbytes)

    def image(self, source: Path | bytes, turn: int, name: str = "image") -> None:
        """An image the user attached at `turn`: a file's path or its bytes, copied in."""
        index = self._take("image", 0, 0.0)
        if index:
            self._lanes["image"].submit(self._write_image, index, source, turn, name, self.now())

    def update_meta(self, **fields: Any) -> None:
        """Change meta.json fields (written on the timeline lane)."""
        if self.failed is None:
            self.meta.update(fields)
            self._timeline.submit(self._guarded, self._write_meta)

    def hold(self, max_s: float = HOLD_MAX_S) -> None:
        """Keep the writer pool idle for at most `max_s` (a call's reply is on its way): what is
        handed over meanwhile waits, in order. An audio chunk ends the hold (it is written at once,
        so a crash still loses at most the last chunk); one frame may wait, a second ends it."""
        self.pool.hold(max_s)

    def release(self) -> None:
        """The writers may run again (the reply's first audio is out)."""
        self.pool.release()

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

    # ------------------------------------------------------------------ writer threads

    def _take(self, what: str, nbytes: int, seconds: float) -> int:
        """The next file number for `what`, or 0 when the chunk is dropped (stopped, or too much
        waiting for the disk: noted once per stretch)."""
        if not self.recording:
            return 0
        with self._lock:
            if self._pending + nbytes > self.max_pending:
                first = what not in self._dropped
                self._dropped[what] = self._dropped.get(what, 0.0) + seconds
                if first:
                    self.event("note", text=f"Recording fell behind the disk; some {what} data was not saved.")
                return 0
            self._dropped.pop(what, None)
            self._pending += nbytes
            self._count[what] += 1
            index = self._count[what]
            group = _GROUP.get(what)
            crowded = False
            if group is not None:
                self._waiting[group] += 1
                crowded = self._waiting[group] > WAITING_MAX[group]
        if crowded:  # one more would wait on a hold: write now (a crash loses at most the last chunk)
            self.pool.release()
        return index

    def _done(self, nbytes: int, group: str) -> None:
        with self._lock:
            self._pending -= nbytes
            self._waiting[group] -= 1

    def _write_audio(self, track: str, index: int, blocks: list[np.ndarray], start: float, rate: int,
                     nbytes: int) -> None:
        try:
            if self.failed is not None:
                return
            data = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
            data, rate = self._resample(track, data, rate, start)
            pcm = np.rint(np.clip(data, -1.0, 1.0) * 32767).astype("<i2")
            name = chunk_name(TRACKS[track], index, "wav")
            self._put(name, _wav_bytes(pcm, rate))
            self._timeline.submit(self._append, {"t": round(start, 4), "kind": "audio", "track": track, "file": name,
                                                 "start": round(start, 4), "duration": round(pcm.size / rate, 4),
                                                 "rate": int(rate)})
        finally:
            self._done(nbytes, "audio")

    def _resample(self, track: str, data: np.ndarray, rate: int, start: float) -> tuple[np.ndarray, int]:
        """To the track's rate in meta (the speaker plays at 48 kHz; speech needs half). One soxr
        stream per run of back-to-back chunks (on the track's lane, so in order): no clicks at
        chunk boundaries."""
        target = self.meta[f"{track}_rate"] or rate
        if target == rate:
            return data, rate
        stream, end = self._streams.get(track, (None, None))
        if stream is None or end is None or abs(start - end) > 0.01 or stream[1] != rate:
            import soxr

            stream = (soxr.ResampleStream(rate, target, 1, dtype="float32"), rate)
        self._streams[track] = (stream, start + data.size / rate)
        return stream[0].resample_chunk(np.ascontiguousarray(data, np.float32)), target

    def _write_frame(self, index: int, image: np.ndarray, start: float, nbytes: int) -> None:
        try:
            if self.failed is not None:
                return
            import cv2

            ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
            if not ok:
                log.warning("A camera frame could not be encoded; skipped")
                return
            name = chunk_name(USER_FRAMES, index, "jpg")
            self._put(name, jpeg.tobytes())
            self._timeline.submit(self._append, {"t": round(start, 4), "kind": "frame", "file": name,
                                                 "start": round(start, 4)})
        finally:
            self._done(nbytes, "frame")

    def _write_image(self, index: int, source: Path | bytes, turn: int, name: str, t: float) -> None:
        if self.failed is not None:
            return
        if isinstance(source, bytes):
            data, suffix = source, ".png" if source[:4] == b"\x89PNG" else ".jpg"
        else:
            try:
                data, suffix = Path(source).read_bytes(), Path(source).suffix.lower() or ".bin"
            except OSError as exc:  # the user's file is gone: noted, not a reason to stop recording
                self._append({"t": round(t, 4), "kind": "note", "text": f"An attached image could not be read: {exc}"})
                return
        stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in Path(name).stem)[:40] or "image"
        rel = f"{USER_IMAGES}/{index:03d}-{stem}{suffix}"
        if self._put(rel, data):
            self._timeline.submit(self._append, {"t": round(t, 4), "kind": "image", "file": rel, "turn": turn})

    def _put(self, rel: str, data: bytes) -> bool:
        try:
            self.disk.write_file(self.folder / rel, data)
        except OSError as exc:
            self._fail(exc)
            return False
        self.bytes_written += len(data)
        return True

    def _append(self, obj: dict[str, Any]) -> None:
        if self.failed is not None or self._file is None:
            return
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        try:
            self.disk.append_line(self._file, line)
        except OSError as exc:
            self._fail(exc)
            return
        self.bytes_written += len(line) + 1

    def _write_meta(self) -> None:
        self.disk.write_json(self.folder / META, self.meta)

    def _guarded(self, fn: Callable[[], None]) -> None:
        if self.failed is not None:
            return
        try:
            fn()
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        with self._lock:
            if self.failed is not None:
                return
            self.failed = plain_error(exc, self.folder, self.kind)
        log.warning("%s (%s: %s)", self.failed, self.folder, exc)
        if self._file is not None:  # say so in the timeline where the disk still takes it (not when full)
            try:
                self.disk.append_line(self._file, json.dumps({"t": round(self.now(), 4), "kind": "note",
                                                              "text": self.failed}))
            except (OSError, ValueError):
                pass
        if self.on_warning is not None:
            try:
                self.on_warning(self.failed)
            except Exception:
                log.exception("recording warning listener failed")

    def _finish(self, fut: Future[SessionRecorder]) -> None:
        try:
            for lane in self._lanes.values():
                lane.wait()
            def end() -> None:
                self._append({"t": round(self.now(), 4), "kind": "end"})
                self.meta["ended_at"] = self.started_at + self.now()
                self._guarded(self._write_meta)

            if self.failed is None:
                self._timeline.submit(end)
                self._timeline.wait()
            else:
                self._timeline.wait()
                self.meta["ended_at"] = self.started_at + self.now()
            if self._file is not None:
                try:
                    self._file.close()
                except OSError:
                    pass
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


def _wav_bytes(pcm: np.ndarray, rate: int) -> bytes:
    import soundfile

    buf = io.BytesIO()
    soundfile.write(buf, pcm, int(rate), subtype="PCM_16", format="WAV")
    return buf.getvalue()
