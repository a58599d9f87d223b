"""Recording cost and crash safety (issue 12), in one run.

1. The scripted call of bench/call.py (fake devices, real time, the real VAD/ASR/LLM/TTS, no
   barge-ins) on one model. Call 0 is recorded all along as the app records a call (raw
   microphone + what the speaker played + the call's events): warm-up, `bytes_per_min`. Then
   `--rounds` calls in which recording is toggled on alternate turns of the same call (round 1 the
   odd turns, round 2 the even ones, …): the same script, the same model state (temperature 0) per
   turn, only the recorder on or off.

   Every recorder hook (microphone tap, speaker tap, call-event listener) is wrapped by the bench
   (not in production code): each call's wall time (perf_counter_ns), CPU time, thread; in an off
   turn the wrapper is timed the same way but does not call the recorder, so both arms pay the
   same instrumentation. The writer threads' jobs are timed too (CPU). Per recorded turn, in its
   window from the end of the user's speech (`eos`, known exactly: the script's last sample) to
   the reply's first audio:

   - `overhead_ms` (target ≤ 5) — the critical-path figure, the worst recorded turn: the CPU
     time the call's own chain of work spent inside recorder code, i.e. the work the recorder
     puts in series with the reply. That chain is: the media thread up to the VAD's end of turn
     (phase TRANSCRIBING; its microphone taps and the listener calls it makes run before the
     detector sees each frame), then the listener calls made from the transcriber thread, the
     asyncio loop and the voice thread (`user`, `phase`, `assistant` events: the call runs its
     listeners synchronously, so each is in series with the reply). Left out: the speaker
     thread's taps (they run after the block is rendered; the speaker is silent until the first
     audio) and the media thread after TRANSCRIBING (the reply no longer waits for it).
     `overhead_ms_p50`: the median turn. CPU, not wall time: on this shared 2-core box a thread
     inside a hook is now and then descheduled or waits for the GIL while other threads run —
     time the recorder does not take from anyone; `critical_path_wall_ms` (p50, max) is the same
     chain in wall time, those waits included. The per-call cost under load
     (`hook_us_p50`/`p99`, wall) is several times a quiet microbenchmark's (~1–2 µs): every
     thread contends for the GIL and two cores.
   - `hooks_all_threads_ms`: every hook call on every thread in the window (wall): an upper bound
     on what they can take from the reply through the GIL.
   - `writer_cpu_in_window_ms`: CPU the writer threads spent in the window; with the hold (the
     pool waits from TRANSCRIBING to the first audio, ≤ 1.5 s, one chunk at most) it is the
     writes between `eos` and TRANSCRIBING and those of turns whose hold ran out
     (`hold_ran_out_turns`).
   - `overhead_bound_ms`: the previous figure, kept for comparison: hook CPU on all threads plus
     writer CPU in the window, worst turn — a bound, not a measurement.
   - The paired A/B: per turn index, the recorded turn's end of speech → first audio minus the
     same turn's unrecorded one in the neighbouring round (`ab_paired_diffs_ms`), their median
     and quartiles. That latency moves by hundreds of ms from run to run (the VAD's frame
     alignment, the ASR's final pass, the LLM), so this A/B says whether recording costs tens of
     ms or more; it cannot resolve a few ms — the wrapped-hook figures do.
2. A child process records a call-like stream in real time (20 ms microphone frames, speaker
   blocks with speech and silence, timeline lines, and the call's phases: after each stretch of
   speech TRANSCRIBING → THINKING → SPEAKING, so the writers are held a second in every three)
   and is killed with SIGKILL mid-call (`--kills` times, at different moments); each folder is
   reopened: every listed file must read back, and `chunks_lost_after_kill` = chunks handed to
   the recorder minus chunks listed, the worst kill (target ≤ 1); `kills_during_hold`: kills that
   landed while the writers were held. Its replay is built from what is left.

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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import call as call_bench  # noqa: E402  bench/call.py
from call import scripted_call, start_gateway, turn_rows  # noqa: E402
from desktop.call.state import CallPhase  # noqa: E402
from desktop.recording.call_hook import CallRecording  # noqa: E402
from desktop.recording.lanes import HOLD_MAX_S  # noqa: E402
from desktop.recording.replay import build_replay, read_timeline  # noqa: E402
from desktop.recording.writer import SessionRecorder  # noqa: E402

CHILD = r"""
import sys, time
import numpy as np
from types import SimpleNamespace
from desktop.call.state import CallPhase
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
PHASES = {100: CallPhase.TRANSCRIBING, 110: CallPhase.THINKING, 0: CallPhase.SPEAKING}
i = 0
while True:  # 20 ms: a microphone frame, a speaker block (speech 2 s of every 3 s), a line now and then
    t = clock.now()
    phase = PHASES.get(i % 150) if i else None  # the speaker falls silent: end of turn; sound again: the reply
    if phase is not None:
        call.listeners[0](SimpleNamespace(kind="phase", phase=phase, text="", metrics=None))
        print("phase", phase.value, flush=True)
    call.frame_taps[0]((rng.standard_normal(320) * 0.05).astype(np.float32), t)
    loud = (i // 50) % 3 != 2
    speaker.on_played[0]((np.sin(np.arange(960) * 0.05 + i) * (0.3 if loud else 0.0)).astype(np.float32), t)
    if i % 10 == 0:
        call.listeners[0](SimpleNamespace(kind="assistant", text="word ", metrics=None, phase=None))
    i += 1
    time.sleep(max(0.0, i * 0.02 - (clock.now() - rec._t0)))
"""


@dataclass
class Probe:
    """The bench's instrumentation of one call's recorder: every hook call (start on the call's
    clock, wall ns, CPU ns, which hook, thread), the writer jobs (start, CPU ns), the phase
    changes, and the switch that turns recording on and off between turns."""

    on: bool = True
    hooks: list[tuple[float, int, int, str, int]] = field(default_factory=list)
    writes: list[tuple[float, int]] = field(default_factory=list)
    phases: list[tuple[float, CallPhase]] = field(default_factory=list)

    def hook(self, name: str, fn):
        hooks, perf, cpu, now, ident = self.hooks, time.perf_counter_ns, time.thread_time_ns, time.monotonic, threading.get_ident

        def wrapper(*args):
            start, c0, p0 = now(), cpu(), perf()  # monotonic: the call's RealClock
            try:
                if self.on:
                    fn(*args)
            finally:
                p1, c1 = perf(), cpu()
                hooks.append((start, p1 - p0, c1 - c0, name, ident()))
        return wrapper

    def listener(self, fn):
        inner = self.hook("event", fn)

        def wrapper(event):
            if event.kind == "phase":  # noted in both arms (the bench's, not the recorder's)
                self.phases.append((time.monotonic(), event.phase))
            inner(event)
        return wrapper

    def job(self, fn):
        writes = self.writes

        def wrapper(*args):
            start, c0 = time.monotonic(), time.thread_time_ns()
            try:
                return fn(*args)
            finally:
                writes.append((start, time.thread_time_ns() - c0))
        return wrapper

    def windows(self, turns, truth) -> list[dict]:
        """Per turn: eos, the VAD's end of turn (TRANSCRIBING), first audio, and what the
        recorder did in between."""
        media = {h[4] for h in self.hooks if h[3] == "mic"}  # the microphone tap runs on the media thread only
        out = []
        for k, (t, want) in enumerate(zip(turns, truth)):
            eos, first = want["eos"], t.first_audio_t
            if first is None:
                continue
            vad = next((s for s, p in self.phases if p is CallPhase.TRANSCRIBING and s >= eos - 0.05), first)
            inside = [h for h in self.hooks if eos <= h[0] <= first]
            chain = [h for h in inside if (h[4] in media and h[0] <= vad)
                     or (h[3] == "event" and h[4] not in media)]
            out.append(dict(
                turn=k + 1, eos_to_audio_ms=(first - eos) * 1000, held_ms=(first - vad) * 1000,
                critical_ms=sum(h[1] for h in chain) / 1e6, critical_cpu_ms=sum(h[2] for h in chain) / 1e6, all_ms=sum(h[1] for h in inside) / 1e6,
                hook_cpu_ms=sum(h[2] for h in inside) / 1e6,
                writer_cpu_ms=sum(c for s, c in self.writes if eos <= s <= first) / 1e6,
                writer_cpu_held_ms=sum(c for s, c in self.writes if vad <= s <= first) / 1e6,
                hook_cpu_by_hook={name: round(sum(h[2] for h in inside if h[3] == name) / 1e6, 3)
                                  for name in ("mic", "played", "event")},
                calls={name: sum(h[3] == name for h in inside) for name in ("mic", "played", "event")},
                critical_by_hook={name: round(sum(h[1] for h in chain if h[3] == name) / 1e6, 3) for name in ("mic", "event")},
                slowest_us=[(h[3], round(h[1] / 1000, 1)) for h in sorted(inside, key=lambda h: -h[1])[:3]]))
        return out


async def play(args: argparse.Namespace, gw, root: Path, on_turn) -> dict:
    """One scripted call, recorded into `root`; `on_turn(i)` says whether turn i (from 1) is
    recorded (switched just before the user starts it)."""
    probe = Probe(on=on_turn(1))
    holder: dict = {}

    def record(call, speaker) -> None:
        rec = SessionRecorder(root, "call", clock=call.clock, ai_rate=24000, model=args.model)
        for name in ("_write_audio", "_append", "_write_frame", "_write_meta"):  # the pool's jobs
            setattr(rec, name, probe.job(getattr(rec, name)))
        recording = CallRecording(rec, hold_s=args.hold_s)
        recording.on_mic = probe.hook("mic", recording.on_mic)
        recording.on_played = probe.hook("played", recording.on_played)
        recording.on_event = probe.listener(recording.on_event)
        recording.attach(call, speaker)
        holder.update(rec=rec, recording=recording, t0=time.monotonic(), holds=rec.pool.gate.holds)
        said = call_bench.FakeMicrophone.say

        def say(mic, *a, **k):  # the user starts a turn: recording on or off for it
            holder["turn"] = holder.get("turn", 0) + 1
            probe.on = on_turn(holder["turn"])
            return said(mic, *a, **k)
        call.mic.say = say.__get__(call.mic)

    out = await scripted_call(args, gw, record)
    rec = holder["recording"].finish().result(30)
    windows = probe.windows(out["call"].turns, out["truth"])
    for w in windows:
        w["recorded"] = on_turn(w["turn"])
    return dict(windows=windows, bytes=rec.bytes_written, minutes=(time.monotonic() - holder["t0"]) / 60.0,
                failed=rec.failed, holds=rec.pool.gate.holds - holder["holds"],
                rows=turn_rows(out["call"], out["truth"]), hooks=probe.hooks)


def killed_child(seconds: float) -> dict:
    """Record in a child process for `seconds`, SIGKILL it, reopen what it left."""
    with tempfile.TemporaryDirectory(prefix="omnidesk-rec-kill-") as root:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        child = subprocess.Popen([sys.executable, "-c", CHILD, root], stdout=subprocess.PIPE, text=True, env=env)
        folder = Path(child.stdout.readline().split(" ", 1)[1].strip())
        time.sleep(seconds)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        lines = child.stdout.read().splitlines()
        handed = sum(line.startswith("handed") for line in lines)
        phases = [line.split()[1] for line in lines if line.startswith("phase")]
        held = bool(phases) and phases[-1] in (CallPhase.TRANSCRIBING.value, CallPhase.THINKING.value)
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
                "replay_after_kill": replay.audio is not None, "during_hold": held}


def quartiles(xs: list[float]) -> list[float] | None:
    if len(xs) < 2:
        return None
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return [round(q[0], 1), round(q[2], 1)]


def per_call_us(hooks, name: str, q: float) -> float | None:
    xs = sorted(h[1] for h in hooks if h[3] == name)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))] / 1000, 2) if xs else None


async def run(args: argparse.Namespace) -> dict:
    gw = await start_gateway(args)
    calls: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="omnidesk-rec-bench-") as root:
            plan = [lambda i: True] + [(lambda r: lambda i: (i + r) % 2 == 1)(r) for r in range(args.rounds)]
            for c, on_turn in enumerate(plan):
                out = await play(args, gw, Path(root), on_turn)
                calls.append(out)
                print(json.dumps({"call": c, "turns": [
                    {"turn": w["turn"], "recorded": w["recorded"], "eos_to_audio_ms": round(w["eos_to_audio_ms"], 1),
                     "critical_ms": round(w["critical_ms"], 3),
                     "critical_cpu_ms": round(w["critical_cpu_ms"], 3), "all_ms": round(w["all_ms"], 3),
                     "writer_cpu_ms": round(w["writer_cpu_ms"], 3), "held_ms": round(w["held_ms"], 1), "calls": w["calls"],
                     "critical_by_hook": w["critical_by_hook"],
                     "hook_cpu_by_hook": w["hook_cpu_by_hook"], "writer_cpu_after_vad_ms": round(w["writer_cpu_held_ms"], 3),
                     "slowest_us": w["slowest_us"]}
                    for w in out["windows"]]}), flush=True)
    finally:
        await gw.close()
    on = [w for out in calls for w in out["windows"] if w["recorded"]]
    off = [w for out in calls for w in out["windows"] if not w["recorded"]]
    diffs = []  # the same turn, recorded in one round and not in the next (or the other way round)
    for a, b in zip(calls[1::2], calls[2::2]):
        wa, wb = {w["turn"]: w for w in a["windows"]}, {w["turn"]: w for w in b["windows"]}
        for turn in sorted(wa.keys() & wb.keys()):
            x, y = wa[turn], wb[turn]
            rec_w, plain_w = (x, y) if x["recorded"] else (y, x)
            diffs.append(rec_w["eos_to_audio_ms"] - plain_w["eos_to_audio_ms"])
    kills = [killed_child(args.kill_after + 0.37 * i) for i in range(args.kills)]  # at different moments of a chunk
    kill = max(kills, key=lambda k: (k["chunks_lost_after_kill"], k["unreadable_after_kill"]))  # the worst
    during = sum(k.pop("during_hold") for k in kills)
    kill.update(kills=len(kills), kills_during_hold=during,
                replay_after_kill=all(k["replay_after_kill"] for k in kills))
    crit = [w["critical_cpu_ms"] for w in on]
    wall = [w["critical_ms"] for w in on]
    hooks = [h for out in calls for h in out["hooks"]]
    first = calls[0]
    return {
        "rounds": args.rounds, "turns_per_call": args.turns, "model": args.model, "tts": args.tts,
        "hold_s": args.hold_s, "recorded_turns": len(on), "unrecorded_turns": len(off),
        "critical_path_cpu_ms": [round(x, 3) for x in crit],
        "overhead_ms_p50": round(statistics.median(crit), 3) if crit else None,
        "critical_path_wall_ms": [round(x, 3) for x in wall],
        "critical_path_wall_ms_p50": round(statistics.median(wall), 3) if wall else None,
        "critical_path_wall_ms_max": round(max(wall), 3) if wall else None,
        "hooks_all_threads_ms": [round(w["all_ms"], 3) for w in on],
        "writer_cpu_in_window_ms": [round(w["writer_cpu_ms"], 3) for w in on],
        "writer_cpu_after_vad_ms": [round(w["writer_cpu_held_ms"], 3) for w in on],
        "overhead_bound_ms": round(max(w["hook_cpu_ms"] + w["writer_cpu_ms"] for w in on), 2) if on else None,
        "hook_us_p50": {n: per_call_us(hooks, n, 0.5) for n in ("mic", "played", "event")},
        "hook_us_p99": {n: per_call_us(hooks, n, 0.99) for n in ("mic", "played", "event")},
        "holds": sum(out["holds"] for out in calls),
        "held_ms_p50": round(statistics.median(w["held_ms"] for w in on), 1) if on else None,
        "hold_ran_out_turns": sum(w["held_ms"] > args.hold_s * 1000 for w in on),
        "eos_to_audio_ms_p50_recorded": round(statistics.median(w["eos_to_audio_ms"] for w in on), 1) if on else None,
        "eos_to_audio_ms_p50_plain": round(statistics.median(w["eos_to_audio_ms"] for w in off), 1) if off else None,
        "ab_paired_diffs_ms": [round(d, 1) for d in diffs],
        "ab_median_diff_ms": round(statistics.median(diffs), 1) if diffs else None,
        "ab_diff_quartiles_ms": quartiles(diffs),
        "bytes_per_min": round(first["bytes"] / max(first["minutes"], 1e-9)),
        "recording_failed": [out["failed"] for out in calls if out["failed"]],
        **kill,
        "overhead_ms": round(max(crit), 3) if crit else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=4, help="calls with recording on alternate turns (after call 0)")
    ap.add_argument("--tts", default="piper", choices=["piper", "espeak"])
    ap.add_argument("--model", default="default")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reply-tokens", type=int, default=40)
    ap.add_argument("--hold-s", type=float, default=HOLD_MAX_S, help="the writers' hold per reply (0: none)")
    ap.add_argument("--kill-after", type=float, default=8.0, help="seconds the child records before SIGKILL")
    ap.add_argument("--kills", type=int, default=3, help="child processes killed (the worst is reported)")
    ap.add_argument("--quick", action="store_true", help="3 turns, two toggled rounds, espeak")
    args = ap.parse_args()
    if args.quick:
        args.turns, args.rounds, args.tts, args.kill_after = 3, 2, "espeak", 5.0
    args.barge_in, args.echo, args.verbose, args.camera = "", True, False, False  # bench/call.py's script as is
    torch.set_num_threads(args.threads)
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
