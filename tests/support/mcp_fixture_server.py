"""A small MCP server for the tests, written with the official SDK. Run as a script:
`python mcp_fixture_server.py stdio` (over stdin/stdout) or `... http PORT` (streamable HTTP on
127.0.0.1:PORT/mcp; with OMNIDESK_FIXTURE_TOKEN set it refuses requests without
`Authorization: Bearer <token>`). Its tools: add, echo, sleep, fail (an error result), crash (the
process exits mid-call)."""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("omnidesk-fixture")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait, then answer."""
    await asyncio.sleep(seconds)
    return "awake"


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ToolError(message)


@server.tool()
def crash() -> str:
    """The server process dies mid-call."""
    os._exit(3)


def http(port: int) -> None:
    import uvicorn

    app = server.streamable_http_app()
    token = os.environ.get("OMNIDESK_FIXTURE_TOKEN")
    if token:
        inner = app

        async def app(scope, receive, send):  # type: ignore[no-redef]
            headers = dict(scope.get("headers") or [])
            if scope["type"] == "http" and headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
            await inner(scope, receive, send)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1] == "http":
        http(int(sys.argv[2]))
    else:
        server.run("stdio")
