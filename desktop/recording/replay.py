"""Replay files of a finished session, built in the background with progress: `replay.wav`
(stereo, the user left and the assistant right, each chunk placed at its start time) and, when
the session has camera frames, `replay.mp4` (the frames as H.264 + that audio as AAC, muxed with
PyAV). Streams in windows, so a long call never sits in memory whole."""

from __future__ import annotations

import json
import logging
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from desktop.recording.disk import Disk
from desktop.recording.paths import META, PART, REPLAY_AUDIO, REPLAY_VIDEO, TIMELINE

log = logging.getLogger(__name__)
WINDOW_S = 30.0  # audio mixed this many seconds at a time
VIDEO_FPS = 10
CHANNEL = {"user": 0, "ai": 1}
Progress = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class Replay:
    audio: Path | None
    video: Path | None


def read_timeline(folder: Path) -> list[dict[str, Any]]:
    """The timeline's objects; lines that are not whole JSON objects (a torn last line) are skipped."""
    out = []
    try:
        with open(Path(folder) / TIMELINE, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and "kind" in obj:
                    out.append(obj)
    except FileNotFoundError:
        pass
    return out


def build_replay(folder: Path, *, progress: Progress | None = None, disk: Disk | None = None) -> Replay:
    """Build the replay files of `folder` and name them in its meta.json. OSError when they cannot
    be written (the session's own files are untouched)."""
    folder, report = Path(folder), progress or (lambda f: None)
    events = read_timeline(folder)
    meta = json.loads((folder / META).read_text(encoding="utf-8"))
    chunks = [e for e in events if e.get("kind") == "audio" and e.get("track") in CHANNEL and (folder / e["file"]).is_file()]
    frames = [e for e in events if e.get("kind") == "frame" and (folder / e["file"]).is_file()]
    rate = int(meta.get("ai_rate") or meta.get("user_rate") or 16000)
    share = 0.5 if frames else 1.0
    audio = build_stereo(folder, chunks, rate, lambda f: report(f * share)) if chunks else None
    video = build_video(folder, frames, audio, lambda f: report(share + f * (1 - share))) if frames else None
    meta["replay"] = {"audio": audio.name if audio else None, "video": video.name if video else None}
    (disk or Disk()).write_json(folder / META, meta)
    report(1.0)
    return Replay(audio, video)


def build_stereo(folder: Path, chunks: list[dict[str, Any]], rate: int, progress: Progress) -> Path:
    """`replay.wav`: PCM_16 stereo at `rate`; overlapping chunks of one side are summed."""
    import soundfile

    chunks = sorted(chunks, key=lambda e: float(e["start"]))
    end_s = max(float(e["start"]) + float(e["duration"]) for e in chunks)
    total, window = int(math.ceil(end_s * rate)), int(WINDOW_S * rate)
    out_path = folder / REPLAY_AUDIO
    part = out_path.with_name(out_path.name + PART)
    active: list[tuple[int, np.ndarray, int]] = []  # (start sample, samples at `rate`, channel)
    nxt = 0
    with _removed_on_error(part), soundfile.SoundFile(part, "w", rate, 2, "PCM_16", format="WAV") as out:
        for w0 in range(0, max(total, 1), window):
            w1 = min(w0 + window, total)
            while nxt < len(chunks) and int(round(float(chunks[nxt]["start"]) * rate)) < w1:
                e = chunks[nxt]
                active.append((int(round(float(e["start"]) * rate)), _load(folder / e["file"], rate), CHANNEL[e["track"]]))
                nxt += 1
            buf = np.zeros((w1 - w0, 2), np.float32)
            for start, data, ch in active:
                lo, hi = max(start, w0), min(start + data.size, w1)
                if hi > lo:
                    buf[lo - w0:hi - w0, ch] += data[lo - start:hi - start]
            active = [a for a in active if a[0] + a[1].size > w1]
            out.write(np.clip(buf, -1.0, 1.0))
            progress(w1 / max(total, 1))
    os.replace(part, out_path)
    return out_path


@contextmanager
def _removed_on_error(part: Path) -> Iterator[None]:
    """A half-built replay file does not stay behind (an error, or a cancel from `progress`)."""
    try:
        yield
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def _load(path: Path, rate: int) -> np.ndarray:
    import soundfile

    data, sr = soundfile.read(path, dtype="float32", always_2d=False)
    if data.ndim > 1:
        data = data.mean(axis=1)
    if sr != rate and data.size:
        import soxr

        data = soxr.resample(data, sr, rate).astype(np.float32, copy=False)
    return data


def _jpeg(path: Path) -> np.ndarray | None:
    import cv2

    try:
        return cv2.imdecode(np.fromfile(path, np.uint8), cv2.IMREAD_COLOR)
    except (OSError, ValueError, cv2.error):
        return None


def build_video(folder: Path, frames: list[dict[str, Any]], audio: Path | None, progress: Progress) -> Path | None:
    """`replay.mp4`: the frames at VIDEO_FPS (each shown until the next) with the stereo audio;
    None when no frame can be read."""
    frames = sorted(frames, key=lambda e: float(e["start"]))
    first = next((img for e in frames if (img := _jpeg(folder / e["file"])) is not None), None)
    if first is None:
        return None
    wav = None
    if audio is not None:
        import soundfile

        wav = soundfile.SoundFile(audio)
    try:
        return _mux(folder, frames, first, wav, progress)
    finally:
        if wav is not None:
            wav.close()


def _mux(folder: Path, frames: list[dict[str, Any]], first: np.ndarray, wav: Any, progress: Progress) -> Path:
    import av
    import cv2

    h, w = (first.shape[0] // 2) * 2, (first.shape[1] // 2) * 2  # yuv420p needs even sizes
    end_s = max(float(frames[-1]["start"]) + 1.0 / VIDEO_FPS, wav.frames / wav.samplerate if wav else 0.0)
    out_path = folder / REPLAY_VIDEO
    part = out_path.with_name(out_path.stem + ".part.mp4")  # the muxer picks the format by name
    with _removed_on_error(part), av.open(str(part), "w") as box:
        vs = box.add_stream("libx264" if "libx264" in av.codecs_available else "mpeg4", rate=VIDEO_FPS)
        vs.width, vs.height, vs.pix_fmt = w, h, "yuv420p"
        vs.options = {"preset": "veryfast", "crf": "26"} if vs.codec_context.name == "libx264" else {}
        aus = box.add_stream("aac", rate=wav.samplerate, layout="stereo") if wav is not None else None
        n_video = int(math.ceil(end_s * VIDEO_FPS))
        fi, loaded, image, apts = 0, 0, first, 0
        for i in range(n_video):
            t = i / VIDEO_FPS
            while fi < len(frames) and float(frames[fi]["start"]) <= t + 1e-6:
                fi += 1  # frames[fi - 1] is the one to show now
            if fi > loaded:
                loaded = fi
                img = _jpeg(folder / frames[fi - 1]["file"])
                if img is not None:  # an unreadable JPEG: the previous picture stays
                    image = img if img.shape[:2] == (h, w) else cv2.resize(img, (w, h))
            vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(image[:h, :w]), format="bgr24")
            vf.pts = i
            box.mux(vs.encode(vf))
            if aus is not None and wav is not None:  # the audio up to this video frame: interleaved
                want = int((i + 1) / VIDEO_FPS * wav.samplerate) - apts
                if want > 0:
                    block = wav.read(want, dtype="int16", always_2d=True)
                    if len(block):
                        af = av.AudioFrame.from_ndarray(np.ascontiguousarray(block.reshape(1, -1)), format="s16",
                                                        layout="stereo")
                        af.sample_rate, af.pts = wav.samplerate, apts
                        apts += len(block)
                        box.mux(aus.encode(af))
            progress((i + 1) / n_video)
        box.mux(vs.encode(None))
        if aus is not None:
            box.mux(aus.encode(None))
    os.replace(part, out_path)
    return out_path
