"""A llama.cpp server on 127.0.0.1 from the xllamacpp wheel, run in a child process: what the
remote-worker tests and bench/remote.py talk to, and a quick way for a user to serve a GGUF.

    python -m desktop.workers.remote.llama_server [--model FILE.gguf] [--port N] [--ctx N] [--slots N] [--api-key K]
        [--pool N] [--lean]

--ctx: context tokens per slot; by default the model's own context (8,192 for the embedded model).
--pool: instead, one KV pool of N tokens that every slot may fill. --lean: as the app's local
worker runs it (workers/llamacpp): the weights read into memory once (no mmap: with it, llama.cpp's
repacked weights sit beside the mapped file's pages, ~2.3x the file), no host-memory prompt cache.

prints one JSON line {"url": ...} once it listens, and serves until Ctrl-C or SIGTERM — or, when
its stdin is a pipe (a parent such as LlamaServer), until that pipe closes. Run by hand, in the
background too (`&`, nohup: stdin is /dev/null or the terminal), it keeps serving."""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


class LlamaServer:
    """The child process. `start()` waits until it listens; `kill()` ends it at once (SIGKILL, as
    a crash would); `start()` again serves on the same port."""

    def __init__(self, model: str | None = None, *, port: int = 0, ctx: int = 0, slots: int = 2,
                 threads: int = 1, api_key: str = "", pool: int = 0, lean: bool = False,
                 log: str | None = None) -> None:
        """`log`: a file for the server's own messages (else they are dropped)."""
        self.model, self.port, self.ctx, self.slots, self.threads = model, port, ctx, slots, threads
        self.api_key, self.pool, self.lean, self.log = api_key, pool, lean, log
        self.url = ""
        self._proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def wait(self) -> int | None:
        """Block until the child ends; its exit code (None if none was started)."""
        proc = self._proc
        return proc.wait() if proc is not None else None

    def start(self, timeout: float = 60.0) -> str:
        args = [sys.executable, "-m", "desktop.workers.remote.llama_server", "--port", str(self.port),
                "--ctx", str(self.ctx), "--slots", str(self.slots), "--threads", str(self.threads)]
        if self.model:
            args += ["--model", self.model]
        if self.api_key:
            args += ["--api-key", self.api_key]
        if self.pool:
            args += ["--pool", str(self.pool)]
        if self.lean:
            args.append("--lean")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        with open(self.log, "ab") if self.log else open(os.devnull, "wb") as err:
            proc = self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                 stderr=err, env=env, text=True)
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not line or not line[0].strip():
            code = proc.poll()
            self.kill()
            if code is not None:
                raise RuntimeError(f"The llama.cpp server stopped before it served (exit code {code}).")
            raise RuntimeError(f"The llama.cpp server did not start within {timeout:.0f} s.")
        self.url = json.loads(line[0])["url"]
        self.port = int(self.url.rsplit(":", 1)[1])
        return self.url

    def kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(10)
            self._proc = None

    close = kill

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def serve(model: str | None, port: int, ctx: int, slots: int, threads: int, api_key: str = "", pool: int = 0,
          lean: bool = False) -> None:
    import xllamacpp as xc

    if model is None:
        from desktop.model.default_model import embedded_default_gguf

        model = str(embedded_default_gguf())
    p = xc.CommonParams()
    p.model.path = model
    p.n_parallel = slots
    if pool:  # one pool every slot may fill
        p.n_ctx, p.kv_unified = pool, True
    elif ctx:
        p.n_ctx = ctx * slots  # llama.cpp splits n_ctx among its slots
    else:  # the model's own context, which every slot may fill (one KV pool shared by the slots)
        p.n_ctx, p.kv_unified = 0, True
    p.cpuparams.n_threads = p.cpuparams_batch.n_threads = threads
    p.hostnames = ["127.0.0.1"]
    p.port = port
    if api_key:
        p.api_keys = [api_key]
    p.verbosity = 0
    if lean:
        p.load_mode = xc.llama_load_mode.LLAMA_LOAD_MODE_NONE
        p.cache_ram_mib = 0
    p.warmup = False
    server = xc.Server(p)
    print(json.dumps({"url": server.listening_address}), flush=True)
    try:
        wait_for_end()
    finally:
        del server


def wait_for_end() -> None:
    """Return when the server should stop: a parent's pipe on stdin closed (the parent ended or
    went away), else Ctrl-C or SIGTERM. Never reads a terminal (a background job would stop)."""
    try:
        piped = stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):  # no stdin at all
        piped = False
    if piped:
        sys.stdin.read()
        return
    ended = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: ended.set())
    while not ended.wait(0.5):  # a timeout: the handlers run in this thread between waits
        pass


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a .gguf file (default: the embedded SmolLM2)")
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    ap.add_argument("--ctx", type=int, default=0, help="context tokens per slot (default 0: the model's own)")
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--api-key", default="", help="require this key (Authorization: Bearer)")
    ap.add_argument("--pool", type=int, default=0, help="one KV pool of N tokens shared by the slots")
    ap.add_argument("--lean", action="store_true", help="no mmap, no host-memory prompt cache (the app's local worker)")
    a = ap.parse_args(argv)
    serve(a.model, a.port, a.ctx, a.slots, a.threads, a.api_key, a.pool, a.lean)


if __name__ == "__main__":
    main()
