"""UI responsiveness while the model streams: the real app objects offscreen on the embedded default
model, 4 conversations streaming at once into real chat pages (or, without the chat page, straight
from gateway.chat into text widgets), and a 5 ms QTimer probe measuring how late each tick fires.

Prints per-phase figures; the last line is JSON {"max_stall_ms", "p99_stall_ms", ...} for the
streaming phase (target: max ≤ 50 ms). `--model tiny` runs it in seconds."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
_TMP = tempfile.mkdtemp(prefix="omnidesk-ui-latency-")
for _name in ("CONFIG", "DATA", "LOG"):  # never touch the user's own settings and conversations
    os.environ.setdefault(f"OMNIDESK_{_name}_DIR", str(Path(_TMP) / _name.lower()))

from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QGridLayout, QPlainTextEdit, QWidget  # noqa: E402

PROMPTS = ("Tell me a long story about a lighthouse keeper.", "Explain how bread is made, step by step.",
           "Describe a journey across the desert in detail.", "Write a long letter to a friend about spring.")


class Probe:
    """A 5 ms precise timer; each tick records how much later than due it fired."""

    def __init__(self, interval_ms: int) -> None:
        self.interval = interval_ms / 1000.0
        self.late_ms: list[float] = []
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self._last = 0.0

    def start(self) -> None:
        self.late_ms.clear()
        self._last = time.perf_counter()
        self.timer.start()

    def stop(self) -> list[float]:
        self.timer.stop()
        return list(self.late_ms)

    def _tick(self) -> None:
        now = time.perf_counter()
        self.late_ms.append(max(0.0, (now - self._last - self.interval) * 1000.0))
        self._last = now


def figures(late: list[float]) -> dict:
    if not late:
        return {"max_stall_ms": 0.0, "p99_stall_ms": 0.0, "ticks": 0}
    ordered = sorted(late)
    return {"max_stall_ms": round(ordered[-1], 1), "p99_stall_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 1),
            "ticks": len(ordered)}


def stream_pages(comp, texts: list[str]):
    """Four real chat pages side by side (built before the probe starts), each sending one
    prompt; returns a coroutine giving (tokens, how)."""
    from desktop.ui.chat.page import ChatPage

    grid_window = QWidget()
    grid = QGridLayout(grid_window)
    pages = [ChatPage(comp.proxy, comp.store, lambda: comp.settings) for _ in texts]
    for i, page in enumerate(pages):
        grid.addWidget(page, i // 2, i % 2)
    grid_window.resize(1600, 1000)
    grid_window.show()
    tokens = 0

    def count(_text: str, stats: dict, page=None) -> None:
        nonlocal tokens
        tokens += stats.get("generated_tokens", 0)

    for page in pages:
        original = page.turn_done
        page.turn_done = lambda turn, t, stats, original=original: (count(t, stats), original(turn, t, stats))
        page.new_conversation()

    async def run() -> tuple[int, str]:
        for page, text in zip(pages, texts):  # one send per event, as a user would (each ~6 ms)
            page.send(text)
            await asyncio.sleep(0.02)
        while any(page.busy for page in pages):
            await asyncio.sleep(0.05)
        grid_window.close()
        return tokens, "chat_page"

    return run()


def stream_direct(comp, texts: list[str]):
    """No chat page: gateway.chat events appended to plain text widgets."""
    from desktop.engine.protocol import ChunkEvent, Done
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
    if args.threads:  # what the composition would pick otherwise: see Composition._boot
        import desktop.composition as composition
        from desktop.workers.factory import make_hosts

        composition.make_hosts = lambda *a, **k: make_hosts(*a, **{**k, "cores": args.threads})
    probe = Probe(args.probe_ms)
    probe.start()  # covers building the window and loading the model, too
    t0 = time.perf_counter()
    settings = Settings(model_source=args.model, dtype=args.dtype, max_tokens=args.tokens, temperature=0.0,
                        slots_per_worker=max(4, args.conversations))
    comp = Composition(app, settings, settings_path=Path(_TMP) / "settings.json")
    comp.start()
    ok = await comp.wait_ready()
    load = figures(probe.stop())
    if not ok:
        raise SystemExit("the model did not load")
    print(f"loaded {comp.model_name} in {time.perf_counter() - t0:.1f} s; during load: {load}", file=sys.stderr)
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
    result = figures(probe.stop())
    name = comp.model_name
    await comp.shutdown()
    result.update({"via": how, "conversations": len(texts), "tokens": tokens, "tok_s": round(tokens / wall, 1),
                   "stream_s": round(wall, 1), "load_max_stall_ms": load["max_stall_ms"],
                   "model": name, "dtype": args.dtype, "threads": args.threads or "default"})
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="default", help="'default' (embedded SmolLM2), 'tiny', or a model path")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--tokens", type=int, default=128, help="max tokens per reply")
    p.add_argument("--conversations", type=int, default=4)
    p.add_argument("--probe-ms", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="torch threads of the worker (0: as the app picks)")
    p.add_argument("--direct", action="store_true", help="stream via gateway.chat even if the chat page exists")
    cli = p.parse_args()
    qt_app = QApplication([sys.argv[0]])
    from desktop.app import AppEventLoop, configure_app

    configure_app(qt_app)
    try:
        with asyncio.Runner(loop_factory=lambda: AppEventLoop(qt_app)) as runner:
            out = runner.run(main(cli))
    finally:
        shutil.rmtree(_TMP, ignore_errors=True)
    print(json.dumps(out))
