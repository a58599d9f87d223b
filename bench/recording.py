"""Recording cost and crash safety (issue 12), in one run.

1. The scripted call of bench/call.py (fake devices, real time, the real VAD/ASR/LLM/TTS) played
   twice on one model, once not recorded and once recorded as the app records a call (raw
   microphone + what the speaker played + the call's events). The order alternates per round
   (plain, recorded, recorded, plain, …) so that warm-up favours neither. Per turn, paired by
   turn: the reply's first audio after the end of speech (`eos_to_audio_ms`), recorded and not.
   That latency varies by hundreds of ms from turn to turn (the ASR's final pass, the LLM), so
   the A/B difference (`ab_median_diff_ms`) cannot resolve a few ms; `overhead_ms` (target ≤ 5)
   is therefore measured where the recorder acts, between each turn's end of speech and the
   reply's first audio: the CPU time of its hooks on the call's threads (microphone, speaker
   callback, event listeners) plus the CPU time of its writer threads (which, holding the GIL
   or a core, can delay the call's threads by at most that much) — the worst turn. Also
   `bytes_per_min` written.
2. A child process records a call-like stream in real time (20 ms microphone frames, speaker
   blocks with speech and silence, timeline lines) and is killed with SIGKILL mid-call (`--kills`
   times, at different moments); each folder is reopened: every listed file must read back, and
   `chunks_lost_after_kill` = chunks handed to the recorder minus chunks listed, the worst kill
   (target ≤ 1). Its replay is built from what is left.

The last line is JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from call import scripted_call, start_gateway, turn_rows  # noqa: E402  bench/call.py
from desktop.recording.call_hook import CallRecording  # noqa: E402
from desktop.recording.replay import build_replay, read_timeline  # noqa: E402
from desktop.recording.writer import SessionRecorder  # noqa: E402

CHILD = r"""
import sys, time
import numpy as np
from types import SimpleNamespace
from desktop.media.clock import RealClock
from desktop.recording.call_hook import CallRecording
from desktop.recording.writer import SessionRecorder

clock = RealClock()
rec = SessionRecorder(sys.argv[1], "call", ai_rate=24000, clock=clock)
print("folder", rec.folder, flush=True)
handed = [0]
real_audio = rec.audio
def audio(*a, **k):
    real_audio(*a, **k)
    handed[0] += 1
    print("handed", handed[0], flush=True)
rec.audio = audio
call = SimpleNamespace(listeners=[], frame_taps=[])
speaker = SimpleNamespace(on_played=[], device_rate=48000)
recording = CallRecording(rec)
recording.attach(call, speaker)
rng = np.random.default_rng(0)
i = 0
while True:  # 20 ms: a microphone frame, a speaker block (speech 2 s of every 3 s), a line now and then
    t = clock.now()
    call.frame_taps[0]((rng.standard_normal(320) * 0.05).astype(np.float32), t)
    loud = (i // 50) % 3 != 2
    speaker.on_played[0]((np.sin(np.arange(960) * 0.05 + i) * (0.3 if loud else 0.0)).astype(np.float32), t)
    if i % 10 == 0:
        call.listeners[0](SimpleNamespace(kind="assistant", text="word ", metrics=None))
    i += 1
    time.sleep(max(0.0, i * 0.02 - (clock.now() - rec._t0)))
"""


def timed(fn, spent: list[tuple[float, float]]):
    """fn, noting (clock time it started, CPU seconds its thread spent in it) of every call in
    `spent`. CPU time, not wall time: a hook that waits for the GIL while the model's Python runs
    is not delaying anything by itself; what the writers take from the others is counted apart."""
    def wrapper(*args):
        start, cpu = time.monotonic(), time.thread_time()  # monotonic: the call's RealClock
        try:
            return fn(*args)
        finally:
            spent.append((start, time.thread_time() - cpu))
    return wrapper


async def play(args: argparse.Namespace, gw, root: Path | None) -> dict:
    """One scripted call; recorded into `root` when given."""
    holder: dict = {}
    spent: list[tuple[float, float]] = []  # the hooks on the call's threads
    writes: list[tuple[float, float]] = []  # the recorder's writer threads

    def record(call, speaker) -> None:
        rec = SessionRecorder(root, "call", clock=call.clock, ai_rate=24000, model=args.model)
        for name in ("_write_audio", "_append", "_write_frame", "_write_meta"):  # the pool threads' work
            setattr(rec, name, timed(getattr(rec, name), writes))
        recording = CallRecording(rec)
        recording.on_mic, recording.on_played, recording.on_event = (
            timed(recording.on_mic, spent), timed(recording.on_played, spent), timed(recording.on_event, spent))
        recording.attach(call, speaker)
        holder.update(rec=rec, recording=recording, t0=time.monotonic())

    out = await scripted_call(args, gw, record if root is not None else None)
    rows = turn_rows(out["call"], out["truth"])
    result = {"eos_to_audio_ms": [r["eos_to_audio_ms"] for r in rows]}
    if root is not None:
        rec = holder["recording"].finish().result(30)
        minutes = (time.monotonic() - holder["t0"]) / 60.0
        windows = [(want["eos"], t.first_audio_t) for t, want in zip(out["call"].turns, out["truth"])
                   if t.first_audio_t is not None]
        in_path = [sum(d for s, d in spent if eos <= s <= first) * 1000 for eos, first in windows]
        writer = [sum(d for s, d in writes if eos <= s <= first) * 1000 for eos, first in windows]
        result.update(bytes=rec.bytes_written, minutes=minutes, hook_s=sum(d for _, d in spent), failed=rec.failed,
                      turns=len(rows), in_path_ms=in_path, writer_ms=writer, hook_calls=len(spent))
    return result


def killed_child(seconds: float) -> dict:
    """Record in a child process for `seconds`, SIGKILL it, reopen what it left."""
    with tempfile.TemporaryDirectory(prefix="omnidesk-rec-kill-") as root:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        child = subprocess.Popen([sys.executable, "-c", CHILD, root], stdout=subprocess.PIPE, text=True, env=env)
        folder = Path(child.stdout.readline().split(" ", 1)[1].strip())
        time.sleep(seconds)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        handed = child.stdout.read().count("handed")
        events = read_timeline(folder)
        listed = [e for e in events if e["kind"] == "audio"]
        unreadable = 0
        import soundfile

        for e in listed:
            try:
                data, rate = soundfile.read(folder / e["file"], dtype="float32")
                unreadable += abs(data.size / rate - e["duration"]) > 1e-3
            except Exception:
                unreadable += 1
        replay = build_replay(folder)
        return {"chunks_handed": handed, "chunks_listed": len(listed), "chunks_lost_after_kill": handed - len(listed),
                "unreadable_after_kill": unreadable, "timeline_lines": len(events),
                "replay_after_kill": replay.audio is not None}


async def run(args: argparse.Namespace) -> dict:
    gw = await start_gateway(args)
    plain: list[list[float | None]] = []
    recorded: list[list[float | None]] = []
    recs: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="omnidesk-rec-bench-") as root:
            for r in range(args.rounds):
                order = (False, True) if r % 2 == 0 else (True, False)
                for rec_on in order:
                    out = await play(args, gw, Path(root) if rec_on else None)
                    (recorded if rec_on else plain).append(out["eos_to_audio_ms"])
                    if rec_on:
                        recs.append(out)
                    print(json.dumps({"round": r + 1, "recorded": rec_on,
                                      "eos_to_audio_ms": [None if x is None else round(x, 1) for x in out["eos_to_audio_ms"]]}),
                          flush=True)
    finally:
        await gw.close()
    diffs = [b - a for pr, rr in zip(plain, recorded) for a, b in zip(pr, rr) if a is not None and b is not None]
    in_path = [x for r in recs for x in r["in_path_ms"]]
    writer = [x for r in recs for x in r["writer_ms"]]
    flat = lambda runs: [x for run in runs for x in run if x is not None]  # noqa: E731
    kills = [killed_child(args.kill_after + 0.37 * i) for i in range(args.kills)]  # at different moments of a chunk
    kill = max(kills, key=lambda k: (k["chunks_lost_after_kill"], k["unreadable_after_kill"]))  # the worst
    kill["kills"] = len(kills)
    kill["replay_after_kill"] = all(k["replay_after_kill"] for k in kills)
    turns = sum(r["turns"] for r in recs)
    return {
        "rounds": args.rounds, "turns_per_call": args.turns, "model": args.model, "tts": args.tts,
        "eos_to_audio_ms_p50_plain": statistics.median(flat(plain)) if flat(plain) else None,
        "eos_to_audio_ms_p50_recorded": statistics.median(flat(recorded)) if flat(recorded) else None,
        "ab_paired_diffs_ms": [round(d, 1) for d in diffs],
        "ab_median_diff_ms": round(statistics.median(diffs), 1) if diffs else None,
        "hooks_in_path_ms": [round(x, 2) for x in in_path],
        "writer_cpu_in_path_ms": [round(x, 2) for x in writer],
        "hook_ms_per_turn": round(1000 * sum(r["hook_s"] for r in recs) / max(turns, 1), 2),
        "bytes_per_min": round(sum(r["bytes"] for r in recs) / max(sum(r["minutes"] for r in recs), 1e-9)),
        "recording_failed": [r["failed"] for r in recs if r["failed"]],
        **kill,
        "overhead_ms": round(max(h + w for h, w in zip(in_path, writer)), 2) if in_path else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2, help="pairs of calls (plain + recorded), order alternating")
    ap.add_argument("--tts", default="piper", choices=["piper", "espeak"])
    ap.add_argument("--model", default="default")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reply-tokens", type=int, default=40)
    ap.add_argument("--kill-after", type=float, default=8.0, help="seconds the child records before SIGKILL")
    ap.add_argument("--kills", type=int, default=3, help="child processes killed (the worst is reported)")
    ap.add_argument("--quick", action="store_true", help="3 turns, one round, espeak")
    args = ap.parse_args()
    if args.quick:
        args.turns, args.rounds, args.tts, args.kill_after = 3, 1, "espeak", 5.0
    args.barge_in, args.echo, args.verbose, args.camera = "", True, False, False  # bench/call.py's script, without barge-ins or camera
    torch.set_num_threads(args.threads)
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
