"""What the app keeps of MCP objects: a server's state, a tool as offered to the model, a call's
result as text. Plain frozen dataclasses, no SDK types, so the chat and the UI never import the SDK."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

STARTING, READY, FAILED, OFF = "starting", "ready", "failed", "off"
MAX_RESULT_CHARS = 16_000  # what a result may add to the conversation
NAME = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class ToolInfo:
    """A tool of a server: `name` as the model sees it (the tool's own unless two servers share
    it), `original` as the server knows it."""

    server: str
    name: str
    original: str
    description: str = ""
    schema: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def spec(self) -> dict[str, Any]:
        """OpenAI's form, as the API receives tools."""
        fn: dict[str, Any] = {"name": self.name, "description": self.description,
                              "parameters": self.schema or {"type": "object", "properties": {}}}
        return {"type": "function", "function": fn}


@dataclass(frozen=True)
class ServerState:
    name: str
    status: str = OFF
    tools: tuple[ToolInfo, ...] = ()
    error: str = ""

    def summary(self) -> str:
        if self.status == READY:
            n = len(self.tools)
            return f"Ready: {n} tool{'s' if n != 1 else ''}"
        if self.status == STARTING:
            return "Starting…"
        if self.status == FAILED:
            return f"Failed: {self.error}"
        return "Off"


@dataclass(frozen=True)
class ToolResult:
    """A call's outcome: the text given back to the model, whether the tool succeeded, how long it took."""

    text: str
    ok: bool
    seconds: float = 0.0


def exposed_name(server: str, tool: str, taken: set[str]) -> str:
    """The tool's own name when it is a valid, free function name; else `server_tool`, cleaned."""
    if not NAME.search(tool) and 0 < len(tool) <= 64 and tool not in taken:
        return tool
    base = NAME.sub("_", f"{server}_{tool}")[:64] or "tool"
    name, n = base, 2
    while name in taken:
        name = f"{base[:60]}_{n}"
        n += 1
    return name


def result_text(content: list[Any], structured: Any = None) -> str:
    """A result's content blocks as text (text blocks joined; others named), shortened to MAX_RESULT_CHARS."""
    parts = []
    for block in content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(getattr(block, "resource", None), "text"):
            parts.append(block.resource.text)
        else:
            parts.append(f"[{kind or 'unknown'} content not shown]")
    text = "\n".join(parts)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[… {len(text) - MAX_RESULT_CHARS} more characters cut]"
    return text
