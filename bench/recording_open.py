"""How long the Recordings page takes on a long call: write a synthetic recording of --minutes
(format v1: 1.5 s WAV chunks per voice, a frame every 2 s, a turn every 10 s), then time the list
scan, opening it (reader), the waveform peaks, and the player's per-tick mix read. Last line JSON."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402


def write_call(root: Path, minutes: float, frames: bool) -> Path:
    import cv2
    import soundfile

    folder = root / "20260101-120000-call-0123abcd"
    for sub in ("user_audio", "ai_audio", "user_frames"):
        (folder / sub).mkdir(parents=True)
    total = minutes * 60
    meta = {"version": 1, "id": "0123abcd" * 4, "type": "call", "title": "Long call", "started_at": 1.767e9,
            "ended_at": 1.767e9 + total, "model": "bench", "settings": {}, "first_words": "hello",
            "user_rate": 16000, "ai_rate": 22050, "video": frames, "replay": {"audio": None, "video": None}}
    (folder / "meta.json").write_text(json.dumps(meta))
    rng = np.random.default_rng(0)
    lines = []
    for track, rate in (("user", 16000), ("ai", 22050)):
        t, n = 0.0, 0
        while t < total:
            n += 1
            data = (0.3 * rng.standard_normal(int(1.5 * rate)) * np.sin(np.linspace(0, 20, int(1.5 * rate)))).astype(np.float32)
            name = f"{track}_audio/{n:06d}.wav"
            soundfile.write(str(folder / name), data, rate, subtype="PCM_16", format="WAV")
            lines.append({"t": t + 1.5, "kind": "audio", "track": track, "file": name, "start": t, "duration": 1.5,
                          "rate": rate})
            t += 1.5
    if frames:
        img = rng.integers(0, 255, (240, 320, 3), dtype=np.uint8)
        ok, jpg = cv2.imencode(".jpg", img)
        for i, t in enumerate(np.arange(0, total, 2.0), start=1):
            (folder / f"user_frames/{i:06d}.jpg").write_bytes(jpg.tobytes())
            lines.append({"t": float(t), "kind": "frame", "file": f"user_frames/{i:06d}.jpg", "start": float(t)})
    for k, t in enumerate(np.arange(0, total, 10.0), start=1):
        lines += [{"t": float(t), "kind": "user_text", "text": f"question {k}", "turn": k},
                  {"t": float(t) + 2, "kind": "assistant_text", "text": f"answer {k} " * 20, "turn": k},
                  {"t": float(t) + 2.1, "kind": "turn_metrics", "turn": k, "eos_to_audio_ms": 300.0}]
    lines.sort(key=lambda e: e["t"])
    (folder / "timeline.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    return folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--no-frames", action="store_true")
    args = ap.parse_args()
    from desktop.recording.library import scan
    from desktop.recording.mix import Mix
    from desktop.recording.reader import open_recording

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        folder = write_call(Path(tmp), args.minutes, not args.no_frames)
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = scan(Path(tmp))
        scan_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        rec = open_recording(folder)
        open_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        rec.user.peaks(100)
        rec.ai.peaks(100)
        peaks_ms = (time.perf_counter() - t0) * 1000
        mix = Mix([rec.user, rec.ai])
        mix.seek(rec.duration / 2)
        t0 = time.perf_counter()
        for _ in range(100):
            mix.read(int(0.03 * mix.rate))  # one 30 ms tick of playback
        tick_ms = (time.perf_counter() - t0) * 1000 / 100
        t0 = time.perf_counter()
        mix.seek(rec.duration / 3)
        mix.read(int(0.3 * mix.rate))  # a seek: the first lead of audio
        seek_ms = (time.perf_counter() - t0) * 1000
        size_mb = rows[0].size / 1e6
    result = {"minutes": args.minutes, "chunks": len(rec.user.chunks) + len(rec.ai.chunks), "frames": len(rec.frames),
              "size_mb": round(size_mb, 1), "write_s": round(write_s, 1), "scan_ms": round(scan_ms, 1),
              "open_ms": round(open_ms, 1), "peaks_ms": round(peaks_ms, 1), "tick_read_ms": round(tick_ms, 3),
              "seek_read_ms": round(seek_ms, 2), "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
