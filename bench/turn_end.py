"""The end of the user's turn in a call (issue 21): spoken turns that pause mid-sentence (400–1,000
ms after "and", "so", "I would like to…", "um") and complete ones, made with Piper and espeak
voices at two speeds (desktop/media/paused_speech.py), played into the fake microphone on a
virtual clock through the call's end-of-turn path (MicFrames → silero-vad → CallState → the
end-of-turn model; tests/support/turn_rig.py).

`false_cutoffs`: paused turns that were ended before their last word (inside a pause).
`eos_to_decision_ms`: the complete turns' last voiced sample → the turn judged over (the model's
own run time counted in). The same audio through the silence rule (500 ms, "End of turn: silence
only") is reported beside it. The last line is JSON, with the CPU model and core count."""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))  # the rig is shared with the tests
sys.path.insert(0, str(ROOT / "bench"))  # bench/machine.py, however this module is imported
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from machine import machine  # noqa: E402
from desktop.media.paused_speech import VOICES, spoken_turns  # noqa: E402


def _p(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _through(rig, turns: list) -> tuple[list, list]:
    heard = [rig.hear(turn) for turn in turns]
    return [h for h in heard if not h.turn.complete], [h for h in heard if h.turn.complete]


def make_turns(n_paused: int, n_complete: int, voices: tuple, seed: int, cache: Path | None) -> list:
    """The spoken turns (minutes on 2 busy cores: Whisper places each pause), kept in `cache`."""
    from desktop.media.paused_speech import EDITION

    key = repr((EDITION, n_paused, n_complete, voices, seed))
    if cache is not None and cache.is_file():
        with cache.open("rb") as f:
            saved_key, turns = pickle.load(f)
        if saved_key == key:
            return turns
    turns = list(spoken_turns(n_paused, n_complete, voices, seed))
    if cache is not None:
        with cache.open("wb") as f:
            pickle.dump((key, turns), f)
    return turns


def measure(n_paused: int = 20, n_complete: int = 8, *, voices: tuple = VOICES, seed: int = 0,
            silence_rule: bool = True, verbose: bool = False, cache: Path | None = None,
            words: bool = True) -> dict:  # fmt: skip
    """Make the turns, run them through the smart rule (and the silence rule), return the figures."""
    from turn_rig import TurnRig

    from desktop.media.smart_turn import SmartTurn

    t0 = time.perf_counter()
    turns = make_turns(n_paused, n_complete, voices, seed, cache)
    made_s = time.perf_counter() - t0
    model = SmartTurn()
    asr = None
    if words:  # the call's rule: the model, and the words so far (Whisper, as in a call: 1 thread)
        from desktop.media.asr import WhisperASR

        asr = WhisperASR(threads=1)
    rig = TurnRig(model, asr)
    paused, complete = _through(rig, turns)
    rig.close()
    decided = [h.eos_to_decision_ms for h in complete if h.eos_to_decision_ms is not None]
    ends = [end for h in paused + complete for end, _ in h.ends]
    out = {
        "false_cutoffs": sum(h.cut_off for h in paused),
        "paused_utterances": len(paused),
        "complete_utterances": len(complete),
        "complete_cut_off": sum(h.cut_off for h in complete),  # a complete turn split at a comma
        "eos_to_decision_ms_p50": _p(decided, 50),
        "eos_to_decision_ms_p95": _p(decided, 95),
        "smart_turn_ms_p50": _p(rig.model_ms, 50),
        "smart_turn_ms_p95": _p(rig.model_ms, 95),
        "model_calls": len(rig.model_ms),
        "held_open_by_words": rig.held_open,
        "ended_by_question": rig.questions,
        "words_ms_p50": _p(rig.words_ms, 50),
        "ended_by": {by: sum(e.by == by for e in ends) for by in sorted({e.by for e in ends})},
        "paused_decision_after_eos_ms_p50": _p([h.eos_to_decision_ms for h in paused if h.eos_to_decision_ms is not None], 50),
        "voices": [" ".join(map(str, v)) for v in voices],
        "make_turns_s": round(made_s, 1),
    }
    if verbose:
        for h in paused + complete:
            print(json.dumps({"text": h.turn.text, "voice": h.turn.voice, "pauses": h.turn.pauses, "end": round(h.turn.end, 2),
                              "cut_off": h.cut_off, "eos_to_decision_ms": h.eos_to_decision_ms,
                              "ends": [(e.by, round(at - h.start, 3), e.probability and round(e.probability, 3)) for e, at in h.ends],
                              "asked": [(round(t - h.start, 2), round(p, 3), w) for t, p, w in h.asked or []]}),
                  file=sys.stderr, flush=True)  # fmt: skip
    if silence_rule:
        rig = TurnRig(None)
        s_paused, s_complete = _through(rig, turns)
        rig.close()
        s_decided = [h.eos_to_decision_ms for h in s_complete if h.eos_to_decision_ms is not None]
        out.update({"silence_false_cutoffs": sum(h.cut_off for h in s_paused),
                    "silence_eos_to_decision_ms_p50": _p(s_decided, 50),
                    "silence_eos_to_decision_ms_p95": _p(s_decided, 95)})  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paused", type=int, default=20)
    ap.add_argument("--complete", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="one line per turn (stderr)")
    ap.add_argument("--cache", type=Path, help="keep the spoken turns in this file for the next run")
    ap.add_argument("--no-words", dest="words", action="store_false", help="the model alone (no open-word check)")
    args = ap.parse_args()
    out = measure(args.paused, args.complete, seed=args.seed, verbose=args.verbose, cache=args.cache,
                  words=args.words)
    out.update(machine())
    out["load_avg"] = os.getloadavg()[0]
    print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    main()
