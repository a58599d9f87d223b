"""UI responsiveness while the model loads and while it streams: the real app objects offscreen on
the embedded default model, 4 conversations streaming at once into real chat pages (or, without the
chat page, straight from gateway.chat into text widgets), and a 5 ms QTimer probe measuring how late
each tick fires (a stall: a gap between ticks beyond the interval).

Phases: load (from the window shown until the model is up; building the window before it shows is
start-up, reported as start_ms) and streaming. The last line is JSON with max_stall_ms / p99_stall_ms
(streaming), load_max_stall_ms / load_p99_stall_ms and the Qt thread's longest GC pause; target:
both max ≤ 16 ms on a quiet machine. --explain prints the longest stalls with what every thread was
doing; --repeat N runs N fresh processes and gives min/median/max. `--model tiny` runs in seconds
but keeps the tiny test model on a thread of this process (see composition.engine_hosts)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, AsyncIterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
_TMP = tempfile.mkdtemp(prefix="omnidesk-ui-latency-")
for _name in ("CONFIG", "DATA", "LOG"):  # never touch the user's own settings and conversations
    os.environ.setdefault(f"OMNIDESK_{_name}_DIR", str(Path(_TMP) / _name.lower()))

from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QGridLayout, QPlainTextEdit, QWidget  # noqa: E402

from bench.stall_trace import GcPauses, StackSampler, explain  # noqa: E402

PROMPTS = ("Tell me a long story about a lighthouse keeper.", "Explain how bread is made, step by step.",
           "Describe a journey across the desert in detail.", "Write a long letter to a friend about spring.")


class Probe:
    """A 5 ms precise timer; each tick records how much later than due it fired, and how much CPU
    the Qt thread used meanwhile: a stall with little CPU was a wait (another process had the core,
    a disk flush, the GIL), one with CPU was work on the Qt thread."""

    def __init__(self, interval_ms: int) -> None:
        self.interval = interval_ms / 1000.0
        self.late_ms: list[float] = []
        self.cpu_ms: list[float] = []  # the Qt thread's CPU time between ticks
        self.ticks: list[float] = []  # perf_counter of each tick, the start first (for --explain)
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self._last = self._cpu = 0.0

    def start(self) -> None:
        self.late_ms.clear()
        self.cpu_ms.clear()
        self._last, self._cpu = time.perf_counter(), time.thread_time()
        self.ticks = [self._last]
        self.timer.start()

    def stop(self) -> dict:
        self.timer.stop()
        return figures(self.late_ms, self.cpu_ms)

    def _tick(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        self.late_ms.append(max(0.0, (now - self._last - self.interval) * 1000.0))
        self.cpu_ms.append((cpu - self._cpu) * 1000.0)
        self.ticks.append(now)
        self._last, self._cpu = now, cpu


def figures(late: list[float], cpu: list[float]) -> dict:
    """max / p99 of the stalls; the Qt thread's CPU time in the longest one, and the most CPU it
    used between two ticks anywhere (work that blocked it even on an idle machine)."""
    if not late:
        return {"max_stall_ms": 0.0, "p99_stall_ms": 0.0, "stall_cpu_ms": 0.0, "max_cpu_ms": 0.0, "ticks": 0}
    ordered = sorted(late)
    worst = late.index(ordered[-1])
    return {"max_stall_ms": round(ordered[-1], 1), "p99_stall_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 1),
            "stall_cpu_ms": round(cpu[worst], 1), "max_cpu_ms": round(max(cpu), 1), "ticks": len(ordered)}


class CountingGateway:
    """The gateway as the pages see it, counting the tokens of every reply that ends."""

    def __init__(self, gateway: Any) -> None:
        self.gateway, self.tokens = gateway, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gateway, name)

    def chat(self, *args: Any, **kwargs: Any) -> "CountedStream":
        return CountedStream(self.gateway.chat(*args, **kwargs), self)  # refusals raise here, as before


class CountedStream:
    def __init__(self, stream: Any, counter: CountingGateway) -> None:
        self.stream, self.counter = stream, counter

    def __getattr__(self, name: str) -> Any:  # request_id, …
        return getattr(self.stream, name)

    async def __aiter__(self) -> AsyncIterator[Any]:
        from desktop.protocol import Done

        async for event in self.stream:
            if isinstance(event, Done):
                self.counter.tokens += event.stats.generated_tokens
            yield event


def stream_pages(comp, texts: list[str]):
    """Four real chat pages side by side (built before the probe starts), each sending one
    prompt; returns a coroutine giving (tokens, how)."""
    from desktop.ui.chat.page import ChatPage

    counter = CountingGateway(comp.proxy)
    grid_window = QWidget()
    grid = QGridLayout(grid_window)
    pages = [ChatPage(counter, comp.store, lambda: comp.settings) for _ in texts]
    for i, page in enumerate(pages):
        grid.addWidget(page, i // 2, i % 2)
    grid_window.resize(1600, 1000)
    grid_window.show()
    for page in pages:
        page.new_conversation()

    async def run() -> tuple[int, str]:
        for page, text in zip(pages, texts):  # one send per event, as a user would (each ~6 ms)
            page.send(text)
            await asyncio.sleep(0.02)
        while any(page.busy for page in pages):
            await asyncio.sleep(0.05)
        grid_window.close()
        return counter.tokens, "chat_page"

    return run()


def stream_direct(comp, texts: list[str]):
    """No chat page: gateway.chat events appended to plain text widgets."""
    from desktop.protocol import ChunkEvent, Done
    from desktop.model.messages import Message

    grid_window = QWidget()
    grid = QGridLayout(grid_window)
    views = [QPlainTextEdit() for _ in texts]
    for i, view in enumerate(views):
        grid.addWidget(view, i // 2, i % 2)
    grid_window.show()

    async def one(view: QPlainTextEdit, text: str) -> int:
        async for event in comp.proxy.chat([Message("user", text)], comp.settings.sampling()):
            if isinstance(event, ChunkEvent):
                view.insertPlainText(event.text_delta)
            elif isinstance(event, Done):
                return event.stats.generated_tokens
        return 0

    async def run() -> tuple[int, str]:
        done = await asyncio.gather(*(one(v, t) for v, t in zip(views, texts)))
        grid_window.close()
        return sum(done), "gateway"

    return run()


async def main(args: argparse.Namespace) -> dict:
    from desktop.composition import Composition
    from desktop.settings import Settings

    app = QApplication.instance()
    if args.threads:  # what the composition would pick otherwise: see composition.engine_hosts
        import desktop.composition as composition
        from desktop.workers.factory import make_hosts

        composition.make_hosts = lambda *a, **k: make_hosts(*a, **{**k, "cores": args.threads})
    probe = Probe(args.probe_ms)
    with GcPauses() as pauses, (StackSampler() if args.explain else contextlib.nullcontext()) as sampler:
        t0 = time.perf_counter()
        settings = Settings(model_source=args.model, dtype=args.dtype, max_tokens=args.tokens, temperature=0.0,
                            slots_per_worker=max(4, args.conversations))
        comp = Composition(app, settings, settings_path=Path(_TMP) / "settings.json")
        comp.start()  # builds the window (not yet on screen: start-up, not a stall), shows it, starts the load
        start_ms = (time.perf_counter() - t0) * 1000.0
        probe.start()  # from the window shown until the model is up: the first paint and the whole load
        ok = await comp.wait_ready()
        load, load_ticks, load_s = probe.stop(), probe.ticks, time.perf_counter() - t0
        if not ok:
            raise SystemExit("the model did not load")
        gc_load = pauses.figures(since=load_ticks[0])
        print(f"window built in {start_ms:.0f} ms; {comp.model_name} loaded in {load_s:.1f} s; "
              f"during load: {load}, {gc_load}", file=sys.stderr)
        if args.explain:
            print("load:\n" + explain(load_ticks, args.probe_ms, pauses, sampler), file=sys.stderr)
        texts = [PROMPTS[i % len(PROMPTS)] for i in range(args.conversations)]
        try:
            import desktop.ui.chat.page  # noqa: F401
            run = stream_direct if args.direct else stream_pages
        except ImportError:
            run = stream_direct
        streaming = run(comp, texts)
        await asyncio.sleep(0.5)  # let the new widgets settle (first paint) before measuring
        probe.start()
        t1 = time.perf_counter()
        tokens, how = await streaming
        wall = time.perf_counter() - t1
        result = probe.stop()
        gc_stream = pauses.figures(since=t1)
        if args.explain:
            print("streaming:\n" + explain(probe.ticks, args.probe_ms, pauses, sampler), file=sys.stderr)
        name = comp.model_name
        await comp.shutdown()
    result.update({"via": how, "conversations": len(texts), "tokens": tokens, "tok_s": round(tokens / wall, 1),
                   "stream_s": round(wall, 1), "load_max_stall_ms": load["max_stall_ms"],
                   "load_p99_stall_ms": load["p99_stall_ms"], "load_stall_cpu_ms": load["stall_cpu_ms"],
                   "load_max_cpu_ms": load["max_cpu_ms"], "load_s": round(load_s, 1), "start_ms": round(start_ms),
                   "gc_max_ms": gc_stream["gc_max_ms"], "load_gc_max_ms": gc_load["gc_max_ms"],
                   "model": name, "dtype": args.dtype, "threads": args.threads or "default"})
    return result


def repeat(runs: int, argv: list[str]) -> dict:
    """Run the bench `runs` times, each in a fresh process (a load is only a first load once), and
    sum up both stall figures: min / median / max; the headline keys carry the worst run."""
    outs = []
    for i in range(runs):
        proc = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"run {i + 1} failed:\n{proc.stderr[-3000:]}")
        outs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        if "--explain" in argv:
            print("\n".join(line for line in proc.stderr.splitlines() if "propagateSizeHints" not in line), file=sys.stderr)
        print(f"run {i + 1}: " + json.dumps(outs[-1]), file=sys.stderr)
    summary: dict = {"runs": runs}
    for key in ("max_stall_ms", "load_max_stall_ms", "p99_stall_ms", "load_p99_stall_ms", "max_cpu_ms",
                "load_max_cpu_ms", "gc_max_ms", "load_gc_max_ms"):
        values = [o[key] for o in outs]
        summary[key] = max(values)
        summary[f"{key}_min_median_max"] = [min(values), statistics.median(values), max(values)]
    summary["tok_s_median"] = statistics.median(o["tok_s"] for o in outs)
    return summary


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="default", help="'default' (embedded SmolLM2), 'tiny', or a model path")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--tokens", type=int, default=128, help="max tokens per reply")
    p.add_argument("--quick", action="store_true", help="short replies (32 tokens): a run takes seconds")
    p.add_argument("--conversations", type=int, default=4)
    p.add_argument("--probe-ms", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="torch threads of the worker (0: as the app picks)")
    p.add_argument("--direct", action="store_true", help="stream via gateway.chat even if the chat page exists")
    p.add_argument("--explain", action="store_true", help="print the longest stalls with every thread's stack")
    p.add_argument("--repeat", type=int, default=1, help="run N times in fresh processes; min/median/max")
    cli = p.parse_args()
    if cli.quick:
        cli.tokens = min(cli.tokens, 32)
    if cli.repeat > 1:
        args = sys.argv[1:]
        drop = {i for i, a in enumerate(args) if a == "--repeat"}
        argv = [a for i, a in enumerate(args) if i not in drop and i - 1 not in drop and not a.startswith("--repeat=")]
        shutil.rmtree(_TMP, ignore_errors=True)
        print(json.dumps(repeat(cli.repeat, argv)))
        raise SystemExit(0)
    qt_app = QApplication([sys.argv[0]])
    from desktop.app import AppEventLoop, configure_app

    configure_app(qt_app)  # the app's own start-up: names, style, and its garbage-collection policy
    try:
        with asyncio.Runner(loop_factory=lambda: AppEventLoop(qt_app)) as runner:
            out = runner.run(main(cli))
    finally:
        shutil.rmtree(_TMP, ignore_errors=True)
    print(json.dumps(out))
