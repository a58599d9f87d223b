"""The final transcript after the turn ends (issue 21): bench/call.py's script spoken by espeak
(en-us, 165 wpm: the call bench's user voice) and Piper, fed in real time in 20 ms frames through
PartialTranscriber with silero-vad's voiced flags, for several ASR setups side by side (each
utterance runs through every setup before the next, so load on the machine hits them alike).

Per utterance and setup: the turn ends `turn_end_ms` after the last sample of speech (a call's
VAD stop ≈200 ms + the end-of-turn model ≈65 ms); `final()` is asked then, and `final_ms` is how
long it made the caller wait. Also the passes run, whether the final reused a pass started before
the turn end, the compute time of a pass, and the word error rate of the final texts over the
script (all words together, as bench/call.py counts it). The last line is JSON, with the CPU.

    python bench/asr_final.py                       # old (30 s window) vs new, espeak + Piper
    python bench/asr_final.py --setups old,new,w10 --voices espeak --sentences 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import soxr  # noqa: E402

from machine import machine  # noqa: E402
from desktop.media.asr import WhisperASR  # noqa: E402
from desktop.media.frames import FRAME_S, FRAME_SAMPLES, SAMPLE_RATE  # noqa: E402
from desktop.media.partials import PartialTranscriber  # noqa: E402
from desktop.media.vad import SileroVAD, VadConfig  # noqa: E402
from desktop.media.wer import word_error_rate, words  # noqa: E402

TURN_END_MS = 265.0  # ≈200 ms of silence for the VAD's stop + ≈65 ms for the end-of-turn model
LEAD_S = 0.3  # silence before each utterance
TAIL_S = 0.6  # silence after it (the turn ends inside it)
# Only the voiced flags matter here (the turn end is placed by the bench, not by the VAD).
BENCH_VAD = VadConfig(min_speech_ms=32, end_silence_ms=5000)


@dataclass(frozen=True)
class Setup:
    """One way to make the final transcript: WhisperASR's and PartialTranscriber's arguments."""

    asr: dict[str, Any] = field(default_factory=dict)
    partials: dict[str, Any] = field(default_factory=dict)


SETUPS = {
    # before issue 21: Whisper's 30 s window on every pass, one lane (the final queues behind a
    # partial pass still running when the pause begins)
    "old": Setup(asr=dict(threads=1, workers=1, min_window_s=None)),
    "cut": Setup(asr=dict(threads=1, workers=1)),  # the window cut to the utterance, one lane
    "new": Setup(asr=dict(threads=1)),  # the cut window + the final's own lane (two workers)
    "w12": Setup(asr=dict(threads=1, min_window_s=12.0)),
    "w15": Setup(asr=dict(threads=1, min_window_s=15.0)),
    "new2t": Setup(asr=dict(threads=2)),
}


def script() -> list[str]:
    """bench/call.py's SCRIPT."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from call_script import SCRIPT

    return list(SCRIPT)


def speak(engine: Any, text: str) -> np.ndarray:
    audio = np.concatenate([np.asarray(c, np.float32).reshape(-1) for c in engine.synthesize(text)])
    return soxr.resample(audio, engine.sample_rate, SAMPLE_RATE).astype(np.float32)


def voices(names: list[str]) -> dict[str, Any]:
    from desktop.model.tts import EspeakTTS, PiperTTS

    made = {"espeak": lambda: EspeakTTS(voice="en-us", rate_wpm=165), "piper": lambda: PiperTTS()}
    return {name: made[name]() for name in names}


def voiced_flags(signal: np.ndarray) -> list[bool]:
    """Per 20 ms frame, what the call feeds PartialTranscriber: in speech and the chunk voiced."""
    vad, flags = SileroVAD(BENCH_VAD), []
    for i in range(0, signal.size, FRAME_SAMPLES):
        vad.process(signal[i : i + FRAME_SAMPLES], i / SAMPLE_RATE)
        flags.append(vad.in_speech and vad.voiced)
    return flags


def run_once(pt: PartialTranscriber, signal: np.ndarray, flags: list[bool], eos_s: float,
             turn_end_ms: float) -> dict[str, Any]:  # fmt: skip
    """Feed one utterance in real time; at the turn end ask for the final text."""
    pt.reset()
    turn_end_s = eos_s + turn_end_ms / 1000
    t0 = time.perf_counter()
    for k, voiced in enumerate(flags):
        frame_end = (k + 1) * FRAME_S
        time.sleep(max(0.0, t0 + frame_end - time.perf_counter()))
        pt.feed(signal[k * FRAME_SAMPLES : (k + 1) * FRAME_SAMPLES], voiced=voiced)
        if frame_end >= turn_end_s:
            break
    asked = t0 + turn_end_s
    time.sleep(max(0.0, asked - time.perf_counter()))
    final = pt.final()
    return dict(text=final.text, final_ms=(time.perf_counter() - asked) * 1000, passes=pt.passes,
                reused=pt.final_reused, final_pass_ms=final.ms)  # fmt: skip


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return round(float(np.percentile(values, q)), 1)


def measure(setups: list[str] | None = None, *, voice_names: list[str] | None = None,
            sentences: list[str] | None = None, turn_end_ms: float = TURN_END_MS,
            log: Any = None) -> dict[str, Any]:  # fmt: skip
    """Run every utterance through every setup; per setup: `final_ms_p50/p95` (turn end → final
    text), `passes` (mean per utterance), `reused` (share of finals from a pass started before
    the turn end), `pass_ms_p50`, `wer` (and per voice). Plus the CPU and its core count."""
    names = setups or ["old", "new"]
    sentences = sentences or script()
    engines = voices(voice_names or ["espeak", "piper"])
    built: dict[str, tuple[PartialTranscriber, list[float]]] = {}
    for name in names:
        setup, pass_ms = SETUPS[name], []
        asr = WhisperASR(**setup.asr)
        pt = PartialTranscriber(asr, on_partial=lambda p, acc=pass_ms: acc.append(p.ms), **setup.partials)
        built[name] = (pt, pass_ms)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for voice, engine in engines.items():
        for text in sentences:
            speech = speak(engine, text)
            lead, tail = np.zeros(int(LEAD_S * SAMPLE_RATE), np.float32), np.zeros(int(TAIL_S * SAMPLE_RATE), np.float32)
            signal = np.concatenate([lead, speech, tail])
            signal = np.pad(signal, (0, -signal.size % FRAME_SAMPLES))  # whole frames
            flags = voiced_flags(signal)
            eos_s = (lead.size + speech.size) / SAMPLE_RATE
            for name in names:
                row = run_once(built[name][0], signal, flags, eos_s, turn_end_ms)
                row.update(voice=voice, said=text, wer=word_error_rate(text, row["text"]))
                rows[name].append(row)
                if log is not None:
                    print(json.dumps({"setup": name, **{k: round(v, 1) if isinstance(v, float) else v
                                                        for k, v in row.items()}}), file=log, flush=True)  # fmt: skip
                time.sleep(0.3)  # let a pass that the final did not need finish
    out: dict[str, Any] = {"turn_end_ms": turn_end_ms, "utterances": len(rows[names[0]]), **machine()}
    for name in names:
        pt, pass_ms = built[name]
        pt.close()
        got = rows[name]
        by_voice = {v: wer_of([r for r in got if r["voice"] == v]) for v in engines}
        out[name] = {
            "final_ms_p50": pct([r["final_ms"] for r in got], 50),
            "final_ms_p95": pct([r["final_ms"] for r in got], 95),
            "final_ms_max": pct([r["final_ms"] for r in got], 100),
            "passes": round(statistics.mean(r["passes"] for r in got), 2),
            "reused": round(sum(r["reused"] for r in got) / len(got), 2),
            "pass_ms_p50": pct(pass_ms, 50),
            "wer": round(wer_of(got), 3),
            "wer_by_voice": {v: round(w, 3) for v, w in by_voice.items()},
            **SETUPS[name].asr,
        }
    return out


def wer_of(rows: list[dict[str, Any]]) -> float:
    """All the script's words against all the heard words, as bench/call.py counts it."""
    said = " ".join(r["said"] for r in rows)
    return word_error_rate(said, " ".join(r["text"] for r in rows)) if words(said) else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setups", default="old,new", help=f"comma-separated, of {', '.join(SETUPS)}")
    ap.add_argument("--voices", default="espeak,piper")
    ap.add_argument("--sentences", type=int, default=None, help="only the script's first N sentences")
    ap.add_argument("--turn-end-ms", type=float, default=TURN_END_MS)
    ap.add_argument("--quiet", action="store_true", help="no per-utterance lines")
    args = ap.parse_args()
    sentences = script()[: args.sentences] if args.sentences else None
    result = measure(args.setups.split(","), voice_names=args.voices.split(","), sentences=sentences,
                     turn_end_ms=args.turn_end_ms, log=None if args.quiet else sys.stdout)  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
