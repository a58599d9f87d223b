"""Start the fixture MCP server (mcp_fixture_server.py) for a test: its stdio config, or the
streamable-HTTP server on a free 127.0.0.1 port (a process, stopped at the end)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from desktop.tools.config import ServerConfig

SCRIPT = str(Path(__file__).with_name("mcp_fixture_server.py"))


def stdio_config(name: str = "fixture", **extra) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=[SCRIPT, "stdio"], **extra)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_server(token: str = "") -> Iterator[str]:
    """The URL of a fixture server over streamable HTTP, up until the block ends."""
    port = free_port()
    env = {**os.environ, "OMNIDESK_FIXTURE_TOKEN": token}
    proc = subprocess.Popen([sys.executable, SCRIPT, "http", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("the fixture HTTP server exited")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
