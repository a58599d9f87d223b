"""Writes recordings the way format v1 says (meta.json, timeline.jsonl, WAV chunks written then
listed, JPEG frames), independently of the app's recorder, for the reader, page and viewer tests."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import numpy as np

USER_RATE, AI_RATE = 16000, 22050


def tone(seconds: float, rate: int, freq: float, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


class SampleRecording:
    """`audio`, `frame`, `event` append to the folder as a recorder would; `finish()` ends it cleanly
    (ended_at, "end"); `crash()` leaves ended_at null and a torn last line."""

    def __init__(self, root: Path, kind: str = "call", *, title: str = "Sample call",
                 first_words: str = "hello there", started_at: float | None = None, video: bool = False) -> None:
        self.started_at = time.time() - 3600 if started_at is None else started_at
        rid = uuid.uuid4().hex
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.started_at))
        self.folder = Path(root) / f"{stamp}-{kind}-{rid[:8]}"
        self.folder.mkdir(parents=True)
        self.meta = {"version": 1, "id": rid, "type": kind, "title": title, "started_at": self.started_at,
                     "ended_at": None, "model": "tiny", "settings": {"call_mode": "duplex"},
                     "first_words": first_words, "user_rate": USER_RATE, "ai_rate": AI_RATE,
                     "video": video, "replay": {"audio": None, "video": None}}
        self._write_meta()
        self.counts = {"user": 0, "ai": 0, "frames": 0}

    def _write_meta(self) -> None:
        tmp = self.folder / "meta.json.tmp"
        tmp.write_text(json.dumps(self.meta), encoding="utf-8")
        tmp.replace(self.folder / "meta.json")

    def event(self, t: float, kind: str, **fields) -> None:
        with (self.folder / "timeline.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps({"t": t, "kind": kind, **fields}) + "\n")

    def audio(self, track: str, start: float, samples: np.ndarray, rate: int) -> Path:
        import soundfile

        self.counts[track] += 1
        sub = "user_audio" if track == "user" else "ai_audio"
        path = self.folder / sub / f"{self.counts[track]:06d}.wav"
        path.parent.mkdir(exist_ok=True)
        part = path.with_name(path.name + ".part")
        soundfile.write(str(part), samples, rate, subtype="PCM_16", format="WAV")
        part.replace(path)
        self.event(start + len(samples) / rate, "audio", track=track, file=f"{sub}/{path.name}", start=start,
                   duration=len(samples) / rate, rate=rate)
        return path

    def frame(self, start: float, color: tuple[int, int, int], size: tuple[int, int] = (160, 120)) -> Path:
        import cv2

        self.counts["frames"] += 1
        path = self.folder / "user_frames" / f"{self.counts['frames']:06d}.jpg"
        path.parent.mkdir(exist_ok=True)
        img = np.zeros((size[1], size[0], 3), np.uint8)
        img[:] = color[::-1]  # BGR
        cv2.rectangle(img, (10, 10), (size[0] // 2, size[1] // 2), (255, 255, 255), -1)
        ok, data = cv2.imencode(".jpg", img)
        assert ok
        path.write_bytes(data.tobytes())
        self.event(start, "frame", file=f"user_frames/{path.name}", start=start)
        return path

    def finish(self, duration: float) -> None:
        self.event(duration, "end")
        self.meta["ended_at"] = self.started_at + duration
        self._write_meta()

    def crash(self) -> None:
        with (self.folder / "timeline.jsonl").open("a", encoding="utf-8") as f:
            f.write('{"t": 99.0, "kind": "assistant_de')  # killed mid-write


def sample_call(root: Path, *, video: bool = True, finish: bool = True, **kw) -> SampleRecording:
    """Two turns, 6 s: the user speaks 0–1.5 s (440 Hz), the reply plays 2–3.5 s (880 Hz) and is cut
    by a barge-in at 3.2 s; the user speaks 3.2–4.2 s, the reply plays 4.5–5.5 s. Frames every second."""
    rec = SampleRecording(root, "call", video=video, **kw)
    rec.event(0.2, "user_partial", text="hello", turn=1)
    rec.audio("user", 0.0, tone(1.5, USER_RATE, 440), USER_RATE)
    rec.event(1.7, "user_text", text="hello there", turn=1)
    rec.event(1.9, "assistant_delta", text="Hi! How ", turn=1)
    rec.audio("ai", 2.0, tone(1.2, AI_RATE, 880), AI_RATE)
    rec.event(3.2, "barge_in", turn=1, heard="Hi!")
    rec.event(3.25, "assistant_text", text="Hi! How can I help you today?", turn=1, heard="Hi!")
    rec.event(3.3, "turn_metrics", turn=1, eos_to_audio_ms=412.0, asr_ms=120.0, ttft_ms=95.0,
              cached_tokens=0, new_tokens=31)
    rec.audio("user", 3.2, tone(1.0, USER_RATE, 440), USER_RATE)
    rec.event(4.3, "user_text", text="what time is it", turn=2)
    rec.audio("ai", 4.5, tone(1.0, AI_RATE, 880), AI_RATE)
    rec.event(4.6, "assistant_text", text="It is noon.", turn=2)
    rec.event(5.5, "turn_metrics", turn=2, eos_to_audio_ms=233.0, ttft_ms=40.0, cached_tokens=31, new_tokens=9)
    if video:
        colors = [(200, 40, 40), (40, 200, 40), (40, 40, 200), (200, 200, 40), (40, 200, 200), (200, 40, 200)]
        for i, color in enumerate(colors):
            rec.frame(float(i), color)
    if finish:
        rec.finish(6.0)
    return rec


def sample_chat(root: Path, **kw) -> SampleRecording:
    """A text chat of three turns over 40 s, no audio."""
    kw.setdefault("title", "Trip planning")
    kw.setdefault("first_words", "Plan a weekend in Lisbon")
    rec = SampleRecording(root, "chat", **kw)
    texts = [("Plan a weekend in Lisbon", "Day one: Alfama and the castle. Day two: Belém."),
             ("Where should I eat?", "Try a tasca near Graça."),
             ("And on a budget?", "Bifanas and the Time Out market.")]
    import cv2

    (rec.folder / "user_images").mkdir()
    ok, png = cv2.imencode(".png", np.full((48, 64, 3), (30, 160, 220), np.uint8))
    (rec.folder / "user_images" / "map.png").write_bytes(png.tobytes())
    for i, (user, reply) in enumerate(texts, start=1):
        rec.event(i * 12.0, "user_text", text=user, turn=i)
        if i == 1:
            rec.event(i * 12.0, "image", file="user_images/map.png", turn=i)
        rec.event(i * 12.0 + 1.0, "assistant_delta", text=reply[:10], turn=i)
        rec.event(i * 12.0 + 2.0, "assistant_text", text=reply, turn=i)
        rec.event(i * 12.0 + 2.1, "turn_metrics", turn=i, ttft_ms=50.0 + i, cached_tokens=10 * i, new_tokens=5)
    rec.finish(40.0)
    return rec
