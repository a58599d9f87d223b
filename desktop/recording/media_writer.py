"""The media of a recording, written on the writer threads: audio chunks as PCM_16 WAV at their
track's rate (resampled in one stream per run of chunks: no clicks), camera frames as JPEG and
the images the user attached, each file complete on disk before its timeline line."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import numpy as np

from desktop.recording.backlog import Backlog
from desktop.recording.lanes import Lane
from desktop.recording.paths import AI_AUDIO, USER_AUDIO, USER_FRAMES, USER_IMAGES, chunk_name
from desktop.recording.session_files import SessionFiles

log = logging.getLogger(__name__)
JPEG_QUALITY = 85
TRACKS = {"user": USER_AUDIO, "ai": AI_AUDIO}


class MediaWriter:
    """Each method is a job for a writer lane (the track's own, so a track's chunks stay in
    order); it lists what it wrote with a job on the `timeline` lane and tells the `backlog`
    when an audio chunk or frame is off its hands."""

    def __init__(self, files: SessionFiles, timeline: Lane, backlog: Backlog) -> None:
        self.files, self.timeline, self.backlog = files, timeline, backlog
        self._streams: dict[str, Any] = {}  # track → ((soxr stream, its input rate), where its input ended)

    def audio(self, track: str, index: int, blocks: list[np.ndarray], start: float, rate: int, nbytes: int) -> None:
        try:
            if self.files.failed is not None:
                return
            data = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
            data, rate = self._resample(track, data, rate, start)
            pcm = np.rint(np.clip(data, -1.0, 1.0) * 32767).astype("<i2")
            name = chunk_name(TRACKS[track], index, "wav")
            self.files.put(name, _wav_bytes(pcm, rate))
            self.timeline.submit(self.files.append, {"t": round(start, 4), "kind": "audio", "track": track,
                                                     "file": name, "start": round(start, 4),
                                                     "duration": round(pcm.size / rate, 4), "rate": int(rate)})
        finally:
            self.backlog.done(nbytes, "audio")

    def _resample(self, track: str, data: np.ndarray, rate: int, start: float) -> tuple[np.ndarray, int]:
        """To the track's rate in meta (the speaker plays at 48 kHz; speech needs half). One soxr
        stream per run of back-to-back chunks (on the track's lane, so in order): no clicks at
        chunk boundaries."""
        target = self.files.meta[f"{track}_rate"] or rate
        if target == rate:
            return data, rate
        stream, end = self._streams.get(track, (None, None))
        if stream is None or end is None or abs(start - end) > 0.01 or stream[1] != rate:
            import soxr

            stream = (soxr.ResampleStream(rate, target, 1, dtype="float32"), rate)
        self._streams[track] = (stream, start + data.size / rate)
        return stream[0].resample_chunk(np.ascontiguousarray(data, np.float32)), target

    def frame(self, index: int, image: np.ndarray, start: float, nbytes: int) -> None:
        try:
            if self.files.failed is not None:
                return
            import cv2

            ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
            if not ok:
                log.warning("A camera frame could not be encoded; skipped")
                return
            name = chunk_name(USER_FRAMES, index, "jpg")
            self.files.put(name, jpeg.tobytes())
            self.timeline.submit(self.files.append, {"t": round(start, 4), "kind": "frame", "file": name,
                                                     "start": round(start, 4)})
        finally:
            self.backlog.done(nbytes, "frame")

    def image(self, index: int, source: Path | bytes, turn: int, name: str, t: float) -> None:
        if self.files.failed is not None:
            return
        if isinstance(source, bytes):
            data, suffix = source, ".png" if source[:4] == b"\x89PNG" else ".jpg"
        else:
            try:
                data, suffix = Path(source).read_bytes(), Path(source).suffix.lower() or ".bin"
            except OSError as exc:  # the user's file is gone: noted, not a reason to stop recording
                self.files.append({"t": round(t, 4), "kind": "note", "text": f"An attached image could not be read: {exc}"})
                return
        stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in Path(name).stem)[:40] or "image"
        rel = f"{USER_IMAGES}/{index:03d}-{stem}{suffix}"
        if self.files.put(rel, data):
            self.timeline.submit(self.files.append, {"t": round(t, 4), "kind": "image", "file": rel, "turn": turn})


def _wav_bytes(pcm: np.ndarray, rate: int) -> bytes:
    import soundfile

    buf = io.BytesIO()
    soundfile.write(buf, pcm, int(rate), subtype="PCM_16", format="WAV")
    return buf.getvalue()
