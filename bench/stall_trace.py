"""Where the Qt thread's stalls come from, for bench/ui_latency.py: garbage-collection pauses per
thread (gc.callbacks) and, with --explain, what every thread was doing during the longest gaps."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import traceback
from collections import deque


class GcPauses:
    """Every collection's pause: (start, ms, generation, thread name), perf_counter clock."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float, int, str]] = []
        self._started: dict[int, float] = {}

    def __enter__(self) -> "GcPauses":
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        now, ident = time.perf_counter(), threading.get_ident()
        if phase == "start":
            self._started[ident] = now
        elif ident in self._started:
            start = self._started.pop(ident)
            self.pauses.append((start, (now - start) * 1000.0, info["generation"], threading.current_thread().name))

    def on_main(self, since: float = 0.0) -> list[tuple[float, float, int, str]]:
        main = threading.main_thread().name
        return [p for p in self.pauses if p[3] == main and p[0] >= since]

    def figures(self, since: float = 0.0) -> dict:
        """Pauses of the Qt (main) thread since `since`: count, longest, per generation."""
        mine = self.on_main(since)
        longest = {g: round(max((p[1] for p in mine if p[2] == g), default=0.0), 1) for g in (0, 1, 2)}
        return {"gc_passes": len(mine), "gc_max_ms": max(longest.values()), "gc_max_ms_by_gen": longest}


class StackSampler:
    """Samples every other thread's Python stack every `period` s into a ring (needs the GIL, so a
    thread that holds it in C shows as a gap with no samples, then where it came out)."""

    def __init__(self, period: float = 0.002, keep: int = 20000) -> None:
        self.period = period
        self.samples: deque[tuple[float, dict[str, str]]] = deque(maxlen=keep)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    def __enter__(self) -> "StackSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(1.0)

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.period):
            names = {t.ident: t.name for t in threading.enumerate()}
            frames = sys._current_frames()
            self.samples.append((time.perf_counter(), {names.get(i, str(i)): short_stack(f)
                                                        for i, f in frames.items() if i != me}))

    def between(self, start: float, end: float) -> list[tuple[float, dict[str, str]]]:
        return [s for s in list(self.samples) if start <= s[0] <= end]


def short_stack(frame, depth: int = 6) -> str:
    """Innermost first: file:line:function < caller < ..."""
    return " < ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}"
                      for f in reversed(traceback.extract_stack(frame)[-depth:]))


def explain(ticks: list[float], interval_ms: float, pauses: GcPauses, sampler: StackSampler | None,
            count: int = 5, over_ms: float = 16.0) -> str:
    """The `count` longest gaps between probe ticks beyond `over_ms` late, with the collections
    inside them and the distinct stacks every thread showed (blank where none did)."""
    gaps = sorted(((b - a, a, b) for a, b in zip(ticks, ticks[1:])), reverse=True)[:count]
    lines = []
    for gap, start, end in gaps:
        if (gap * 1000.0 - interval_ms) <= over_ms:
            break
        lines.append(f"stall {gap * 1000.0 - interval_ms:.0f} ms (+{start - ticks[0]:.2f} s):")
        lines += [f"  gc gen{g} {ms:.1f} ms on {name}" for t, ms, g, name in pauses.pauses
                  if t < end and t + ms / 1000.0 > start]
        seen: set[tuple[str, str]] = set()
        for t, stacks in (sampler.between(start - 0.001, end + 0.003) if sampler else []):
            for name, stack in stacks.items():
                if (name, stack) not in seen:
                    seen.add((name, stack))
                    lines.append(f"  +{(t - start) * 1000.0:4.0f} ms [{name}] {stack}")
    return "\n".join(lines) or f"no stall over {over_ms:.0f} ms"
