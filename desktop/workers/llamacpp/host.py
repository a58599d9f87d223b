"""A GGUF model on llama.cpp as a local worker: the app starts a llama.cpp server (the xllamacpp
wheel, remote/llama_server.py) as a child process on 127.0.0.1 for the chosen file, and serves it
with the remote machinery (remote/host.py: sessions, cancel, health checks, conversations pinned
to their llama.cpp slot so its prompt cache hits). This host owns the child: it starts it with the
worker, restarts it when it dies (or stops answering), and stops it with the app; it reports load
progress and errors as a local worker does, in words about llama.cpp rather than a server URL.

What needs our own KV is refused with a sentence (features.py): images, constrained output,
raw prompts. Conversations are not kept on disk (llama.cpp's prompt cache lives in its RAM)."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from desktop.errors import REMOTE_UNREACHABLE
from desktop.model.gguf_facts import GgufFacts, read_facts
from desktop.protocol import Command, ErrorEvent, Reset, EventSink, WorkerHost, WorkerState, WorkerStatus
from desktop.workers.llamacpp.features import NO_SLIDE, refusal
from desktop.workers.llamacpp.plan import ServerPlan
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.llama_server import LlamaServer
from desktop.workers.remote.spec import RemoteSpec

log = logging.getLogger(__name__)
CRASHED = "worker_crashed"
MAX_RESTARTS = (3, 60.0)  # this many deaths within this many seconds: stop restarting


class LlamaCppHost(WorkerHost):
    """`plan`: the server's slots, KV pool and threads; `server`: makes the child (tests pass a
    factory); `health`: the RemoteHost's health_s / backoff / timeout_s."""

    def __init__(self, worker_id: str, path: str, plan: ServerPlan, *,
                 server: Callable[..., LlamaServer] = LlamaServer, **health: float | tuple[float, float]) -> None:
        self.worker_id, self.path, self.plan = worker_id, path, plan
        self._make_server, self._health = server, health
        self._server: LlamaServer | None = None
        self._remote: RemoteHost | None = None
        self._sink: EventSink | None = None
        self._facts: GgufFacts | None = None
        self._closing = False
        self._deaths: list[float] = []
        self._idle: WorkerStatus | None = None  # the last IDLE status told, to tell again after a restart
        self._serving: int | None = None  # the pid of the child that serves now (None while it (re)starts)
        self._lock = threading.Lock()
        self._log = Path(tempfile.gettempdir()) / f"omnidesk-llamacpp-{worker_id}-{id(self):x}.log"

    @property
    def pid(self) -> int | None:
        """The llama.cpp child's process id (None before it runs)."""
        return self._server.pid if self._server is not None else None

    @property
    def url(self) -> str:
        """Where the child serves on 127.0.0.1 ("" before it is up): for diagnostics and benchmarks."""
        remote = self._remote
        return remote.spec.url if remote is not None else ""

    # ------------------------------------------------------------------ WorkerHost

    def start(self, sink: EventSink) -> None:
        self._sink = sink
        name = Path(self.path).name
        self._status(WorkerState.LOADING, f"Loading {name} on llama.cpp…")
        threading.Thread(target=self._run, name=f"llamacpp-{self.worker_id}", daemon=True).start()

    def submit(self, cmd: Command) -> None:
        rid = getattr(cmd, "request_id", None)
        said = refusal(cmd)
        if said is not None and rid is not None:
            self._emit(ErrorEvent(rid, said[0], said[1]))
            return
        remote = self._remote
        if remote is None:
            if rid is not None:
                code, text = ("shutdown", "The assistant is shutting down.") if self._closing else \
                    ("not_ready", "The llama.cpp worker is still loading its model.")
                self._emit(ErrorEvent(rid, code, text, retryable=not self._closing))
            return
        remote.submit(cmd)

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._closing = True
            remote, server = self._remote, self._server
        if remote is not None:
            remote.close(timeout)
        if server is not None:
            server.kill()
        self._log.unlink(missing_ok=True)

    # ------------------------------------------------------------------ the child's life

    def _run(self) -> None:
        try:
            self._facts = read_facts(self.path)
        except Exception as exc:  # ModelLoadError's sentence, or a bug: never a traceback to the user
            self._status(WorkerState.ERROR, getattr(exc, "message", None) or f"{self.path} cannot be read ({exc}).",
                         code="model_load")
            return
        if not self._launch(first=True):
            return
        while True:
            server = self._server
            code = server.wait() if server is not None else None
            with self._lock:
                self._serving = None
                if self._closing:
                    return
            if not self._relaunch(code):
                return

    def _launch(self, first: bool) -> bool:
        """Start the child and the RemoteHost over it (first) or restart the child on its port."""
        facts = self._facts
        assert facts is not None
        pool = self.plan.pool(facts)
        with self._lock:
            if self._closing:
                return False
            if self._server is None:
                self._server = self._make_server(str(facts.path), slots=self.plan.slots, threads=self.plan.threads,
                                                 pool=pool, lean=True, log=str(self._log))
            server = self._server
        self._log.write_bytes(b"")
        try:
            url = server.start(timeout=60.0 + facts.size / 50e6)  # ~50 MB/s from a slow disk
        except Exception as exc:
            if self._closing:  # closed while it loaded: nothing to report
                return False
            reason = self._last_log_line() or str(exc)
            self._status(WorkerState.ERROR, f"llama.cpp could not load {facts.path.name}: {reason}", code="model_load")
            return False
        with self._lock:
            self._serving = server.pid
        if first:
            remote = RemoteHost(self.worker_id, RemoteSpec(url, slots=self.plan.slots), **self._health)  # type: ignore[arg-type]
            with self._lock:
                if self._closing:
                    server.kill()
                    return False
                self._remote = remote
            remote.start(self._relay)
        elif self._remote is not None:
            # Its health check may not have seen the old child go (a quick restart): what the old
            # one held is gone either way, and the worker serves again.
            self._remote.submit(Reset())
            if self._idle is not None:
                self._emit(self._idle)
        log.info("llama.cpp worker %s serves %s at %s (pid %s, %d slots, %d-token KV pool, %d threads)",
                 self.worker_id, facts.path.name, url, server.pid, self.plan.slots, pool, self.plan.threads)
        return True

    def _relaunch(self, code: int | None) -> bool:
        now = time.monotonic()
        self._deaths = [t for t in self._deaths if now - t < MAX_RESTARTS[1]] + [now]
        why = self._last_log_line()
        said = f"exit code {code}" + (f": {why}" if why else "")
        if len(self._deaths) > MAX_RESTARTS[0]:
            self._status(WorkerState.ERROR, f"The llama.cpp worker keeps stopping ({said}); it is not restarted. "
                         "Choose the torch runner for GGUF files in Settings → Model, or another model.", code=CRASHED)
            return False
        log.warning("llama.cpp worker %s stopped (%s); restarting it", self.worker_id, said)
        self._status(WorkerState.ERROR, f"The llama.cpp worker stopped ({said}); restarting it…", code=CRASHED,
                     restarting=True)
        return self._launch(first=False)  # the RemoteHost's health check sees it come back: IDLE

    def _last_log_line(self) -> str:
        try:
            lines = [ln.strip() for ln in self._log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        errors = [ln for ln in lines if "error" in ln.lower() or "failed" in ln.lower()]
        return (errors or lines or [""])[-1][:300]

    # ------------------------------------------------------------------ what the RemoteHost says

    def _relay(self, _wid: str, event: object) -> None:
        """The RemoteHost's events, told as a local worker's: no URL, llama.cpp named; an
        unreachable server is a crashed or hung child (a hung one is killed, so it restarts)."""
        url = self._remote.spec.url if self._remote is not None else ""
        if isinstance(event, WorkerStatus):
            if event.state is WorkerState.LOADING:
                return  # we said it already, in our words
            if event.state is WorkerState.ERROR and event.code == REMOTE_UNREACHABLE:
                self._kill_hung()
                return  # the child's death is reported by _relaunch
            threads = f"{self.plan.threads} thread{'s' if self.plan.threads != 1 else ''}"
            event = dataclasses.replace(event, device=f"llama.cpp · CPU · {threads}",
                                        message=event.message.replace(f"remote worker at {url}", "llama.cpp worker"))
            if event.state is WorkerState.IDLE:
                self._idle = event
        elif isinstance(event, ErrorEvent):
            if event.code == REMOTE_UNREACHABLE:
                event = ErrorEvent(event.request_id, CRASHED, "The llama.cpp worker stopped while answering; it is being "
                                   "restarted. Try again in a moment.", retryable=True)
            else:
                text = event.message.replace(f"remote worker at {url}", "llama.cpp worker")
                text = text.replace(f"server at {url}", "llama.cpp worker")
                if event.code == "context_length_exceeded":
                    text = f"{text.rstrip('.')}. {NO_SLIDE}"
                event = dataclasses.replace(event, message=text)
        self._emit(event)

    def _kill_hung(self) -> None:
        with self._lock:
            pid = None if self._closing else self._serving
        if pid is not None:  # a live child that does not answer is hung: end it, and _run restarts it
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):  # already gone
                pass

    def _status(self, state: WorkerState, message: str = "", code: str = "", restarting: bool = False) -> None:
        n = self.plan.slots
        self._emit(WorkerStatus(self.worker_id, state, message, device="llama.cpp · CPU", capacity=n, num_slots=n,
                                code=code, restarting=restarting))

    def _emit(self, event: object) -> None:
        if self._sink is not None:
            self._sink(self.worker_id, event)  # type: ignore[arg-type]
