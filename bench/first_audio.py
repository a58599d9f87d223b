"""First audio of a spoken reply (issue 21, part 4): reply text → first audible sample, and gaps.

Ten realistic assistant replies are streamed as tokens (≈4 characters each, default 20 tokens/s,
the embedded default model's speed; `--rate 0`: as fast as possible) into the output pipeline
(segmenter → TTS → a fake speaker that plays in real time, 20 ms blocks at 48 kHz). For each TTS
engine (Piper, espeak) the variants run side by side, reply by reply, so that the machine's load
hits them alike:
- `old`: today's segmentation (the first segment waits for six words, then backs off to any
  boundary, even "Sure,") and the fixed 120 ms pre-roll;
- `clause`: the first clause first (≥ 3 words), fixed 120 ms pre-roll;
- `new`: the first clause first and the adaptive pre-roll (`media/preroll.py`).
Per reply: the first token fed → the first audible sample (ms), the first segment and its
synthesis time, underruns and the silence they left, and the longest silence between the first
and the last audible sample heard (a starved speaker or a long pause between segments), over
the first `listen_s` seconds of the reply (then it is stopped, as a barge-in would; the next
starts 1.5 s later, and the variants' order rotates from reply to reply). No LLM runs
here, so the TTS has the CPU to itself (in a call the model's decode competes for it). The last
line is JSON, with the CPU model and the core count."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from desktop.media.clock import RealClock  # noqa: E402
from desktop.media.fake_audio import FakeAudioOutput  # noqa: E402
from desktop.media.preroll import PreRollConfig  # noqa: E402
from desktop.model.tts import make_tts  # noqa: E402
from desktop.speech.pipeline import Pipeline, PipelineDone, PipelineError, Segment, SegmenterConfig  # noqa: E402
from machine import machine  # noqa: E402

REPLIES = [
    "Sure, here is a simple way to make a good cup of tea. Boil fresh water, pour it over the leaves "
    "and let it steep for three to five minutes.",
    "The capital of France is Paris, which is also its largest city. About two million people live "
    "there, and more than ten million in the wider region.",
    "Yes. Paris was founded more than two thousand years ago by a Celtic tribe called the Parisii, "
    "and it grew into a Roman town named Lutetia.",
    "I would start with the Louvre, the most visited museum in the world. Then walk along the Seine "
    "to Notre Dame and the Latin Quarter.",
    "Eating out can be expensive in the centre, but bakeries and markets are cheap. A fresh baguette "
    "costs about one euro.",
    "Good question! A classic dish to try is boeuf bourguignon: beef slowly cooked in red wine with "
    "onions, carrots and mushrooms.",
    "In French you say merci, or merci beaucoup for thank you very much. People also appreciate a "
    "simple bonjour when you enter a shop.",
    "Spring in Paris is mild and often rainy, with temperatures between ten and twenty degrees. Bring "
    "a light jacket and an umbrella.",
    "To reset your password, open the settings page and choose security. Then follow the link in "
    "the email we send you, and pick a new password.",
    "Well, it depends on what you need. For short trips the metro is fastest; for longer ones, take "
    "the regional trains or a bus.",
]
VARIANTS = {
    "old": (SegmenterConfig(first_clause=False, first_min_tokens=1), None),
    "clause": (SegmenterConfig(), None),
    "new": (SegmenterConfig(), PreRollConfig()),
}
_TOKEN = re.compile(r"\s*[A-Za-z']{1,4}|\s*[^A-Za-z'\s]|\s+")
AUDIBLE = 1e-3
SETTLE_S = 1.5  # between replies: longer than Piper takes for one sentence here


def tokens(text: str) -> list[str]:
    """Pieces of about one LLM token each (≈4 letters, punctuation apart)."""
    return _TOKEN.findall(text)


class Rig:
    """One variant: a pipeline into its own fake speaker (playing in real time), kept for all
    the replies so that an adaptive pre-roll learns as it would in the app."""

    def __init__(self, engine: str, seg: SegmenterConfig, pre: PreRollConfig | None) -> None:
        self.clock = RealClock()
        self.out = FakeAudioOutput(self.clock, device_rate=48000, pre_roll_ms=120, record=False, adaptive=pre)
        self.blocks: list[tuple[float, float]] = []  # (start time, peak) of every block played
        self.out.on_played.append(lambda b, t: self.blocks.append((t, float(np.abs(b).max()) if b.size else 0.0)))
        self.out.start(thread=True)
        self.events: list = []
        self.pipe = Pipeline(make_tts(engine), self.out, seg, clock=self.clock, on_event=self.events.append)
        self.pipe.start()

    def close(self) -> None:
        self.pipe.close()
        self.out.close()

    def reply(self, rid: str, text: str, rate: float, listen_s: float) -> dict:
        before = self.out.stats()
        n_blocks = len(self.blocks)
        t0 = self.clock.now()

        def feed() -> None:
            for i, piece in enumerate(tokens(text)):
                if rate > 0:
                    delay = t0 + i / rate - self.clock.now()
                    if delay > 0:
                        time.sleep(delay)
                self.pipe.feed(rid, piece)
            self.pipe.end(rid)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        deadline = time.monotonic() + 60
        while self.out.first_audio_at(rid) is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"no audio for {rid}")
            time.sleep(0.005)
        first = self.out.first_audio_at(rid)
        stop_at = first + listen_s
        while self.clock.now() < stop_at:
            done = any(isinstance(e, (PipelineDone, PipelineError)) and e.request_id == rid for e in self.events)
            if done and self.out.queued_s(rid) == 0:
                break
            time.sleep(0.01)
        self.pipe.cancel(rid)  # as a barge-in would: the rest is not listened to
        feeder.join(5)
        time.sleep(SETTLE_S)  # a chunk being made when the reply was stopped finishes first
        after = self.out.stats()
        done = next((e for e in self.events if isinstance(e, PipelineDone) and e.request_id == rid), None)
        audio_s = done.stats["audio_s"] if done is not None else 0.0
        rtf = done.stats["synth_ms"] / 1000 / audio_s if audio_s else float("nan")
        segs = [e for e in self.events if isinstance(e, Segment) and e.request_id == rid and e.text]
        heard = [(t, p) for t, p in self.blocks[n_blocks:] if first - 0.02 <= t < min(stop_at, self.clock.now())]
        return {"first_audio_ms": 1000 * (first - t0), "first_segment": segs[0].text if segs else "",
                "first_words": len(segs[0].text.split()) if segs else 0,
                "underruns": after["underruns"] - before["underruns"],
                "starved_ms": 1000 * (after["starved_s"] - before["starved_s"]),
                "max_gap_ms": _longest_silence(heard, self.out.block_s),
                "pre_roll_ms": after["pre_roll_ms"], "tts_rtf": rtf}


def _longest_silence(blocks: list[tuple[float, float]], block_s: float) -> float:
    """The longest run of silent blocks between two audible ones, in ms."""
    loud = [i for i, (_, peak) in enumerate(blocks) if peak > AUDIBLE]
    if len(loud) < 2:
        return 0.0
    return 1000 * block_s * max((b - a - 1 for a, b in zip(loud, loud[1:])), default=0)


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 1) if values else float("nan")


def measure(engines: tuple[str, ...] = ("piper", "espeak"), variants: tuple[str, ...] = ("old", "clause", "new"),
            replies: list[str] = REPLIES, rate: float = 20.0, listen_s: float = 6.0,
            log=lambda line: None) -> dict:  # fmt: skip
    """Every reply through every variant of every engine (variants interleaved reply by reply);
    returns per engine and variant the first-audio p50/p95 (ms), underruns, starved ms, the
    longest silence p50/p95 and the first segment's mean length in words, plus the CPU."""
    result: dict = {**machine(), "replies": len(replies), "tokens_per_s": rate, "listen_s": listen_s}
    for engine in engines:
        warm = make_tts(engine)
        list(warm.synthesize("Warm up, please."))
        rigs = {v: Rig(engine, *VARIANTS[v]) for v in variants}
        rows: dict[str, list[dict]] = {v: [] for v in variants}
        try:
            for i, text in enumerate(replies):
                for v in variants[i % len(variants):] + variants[:i % len(variants)]:  # order rotates
                    row = rigs[v].reply(f"{engine}-{v}-{i}", text, rate, listen_s)
                    rows[v].append(row)
                    log(f"{engine:6} {v:6} reply {i}: first audio {row['first_audio_ms']:6.0f} ms, "
                        f"underruns {row['underruns']}, longest silence {row['max_gap_ms']:4.0f} ms, "
                        f"RTF {row['tts_rtf']:.2f}, pre-roll {row['pre_roll_ms']:4.0f} ms, first segment {row['first_segment']!r}")
        finally:
            for rig in rigs.values():
                rig.close()
        for v, rs in rows.items():
            first = [r["first_audio_ms"] for r in rs]
            gaps = [r["max_gap_ms"] for r in rs]
            result[f"{engine}_{v}"] = {
                "first_audio_ms_p50": _pct(first, 50), "first_audio_ms_p95": _pct(first, 95),
                "underruns": sum(r["underruns"] for r in rs),
                "starved_ms": round(sum(r["starved_ms"] for r in rs), 1),
                "max_gap_ms_p50": _pct(gaps, 50), "max_gap_ms_p95": _pct(gaps, 95),
                "first_words_mean": round(statistics.mean(r["first_words"] for r in rs), 2),
                "pre_roll_ms_last": round(rs[-1]["pre_roll_ms"], 1),
                "tts_rtf_p50": round(float(np.nanmedian([r["tts_rtf"] for r in rs])), 3),
            }
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engines", default="piper,espeak")
    p.add_argument("--variants", default="old,clause,new")
    p.add_argument("--rate", type=float, default=20.0, help="tokens per second (0: as fast as possible)")
    p.add_argument("--listen", type=float, default=6.0, help="seconds of each reply listened to")
    p.add_argument("--replies", type=int, default=len(REPLIES))
    args = p.parse_args()
    result = measure(tuple(args.engines.split(",")), tuple(args.variants.split(",")), REPLIES[:args.replies],
                     args.rate, args.listen, log=lambda line: print(line, flush=True))  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
