"""Conversation export as Markdown or JSON, and the one-line cache/speed summary of a reply
that both the export and the chat view's badge show. No Qt.

Images go with the export: a JSON export carries each message's images as data URLs
(`image_data`), self-contained; a Markdown export copies them into a folder beside it
("<name> images/") and links them."""

from __future__ import annotations

import base64
import json
import shutil
import time
from pathlib import Path
from typing import Any, Literal

from desktop.chat.conversations import Conversation
from desktop.chat.reply_limit import limit_of
from desktop.protocol.reasons import label_of
from desktop.safefile import write_atomic

Format = Literal["markdown", "json"]
ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}


REMOTE_PREFIX = "remote"  # the ids of remote workers: remote0, remote1, … (workers/factory.remote_hosts)


def stats_line(stats: dict[str, Any] | None) -> str:
    """E.g. "cached 412 / new 38 tokens · TTFT 85 ms · 14.2 tok/s · history cached": the numbers,
    the reason in the words of protocol/reasons.py (why the cache held all, part or none of the
    history), and how the turn ended when that was not natural."""
    if not stats:
        return ""
    inp, cached = int(stats.get("input_tokens", 0)), int(stats.get("cached_tokens", 0))
    gen, decode_ms = int(stats.get("generated_tokens", 0)), float(stats.get("decode_ms", 0.0))
    parts = [f"cached {cached} / new {max(inp - cached, 0)} tokens"]
    if typed := int(stats.get("typed_tokens", 0)):
        parts.append(f"{typed} tokens prefilled while typing")
    if stats.get("ttft_ms"):
        parts.append(f"TTFT {float(stats['ttft_ms']):.0f} ms")
    if decode_ms > 0 and gen > 1:
        parts.append(f"{1000.0 * (gen - 1) / decode_ms:.1f} tok/s")
    reason = label_of(stats.get("miss_reason", ""), stats.get("kind", ""))
    if reason:
        parts.append(reason)
    finish = stats.get("finish_reason", "")
    if finish in ("stopped", "cancelled"):
        parts.append("stopped")
    elif (limit := limit_of(stats)) is not None:
        parts.append(limit.badge)
    if str(stats.get("worker", "")).startswith(REMOTE_PREFIX):  # answered by another machine: say which
        parts.append(str(stats["worker"]))
    return " · ".join(parts)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def to_markdown(conv: Conversation, images: dict[str, str] | None = None) -> str:
    """A readable Markdown document: title, dates, system prompt, then each message; `images` maps
    a stored image path to the link written for it (none: images are named only)."""
    lines = [f"# {conv.title or 'Conversation'}", "",
             f"*Exported from Omnidesk · started {_when(conv.created)} · last message {_when(conv.updated)}*", ""]
    if conv.system_prompt:
        lines += ["**System prompt**" + (f" ({conv.preset})" if conv.preset else ""), ""]
        lines += ["> " + line if line else ">" for line in conv.system_prompt.splitlines()] + [""]
    for m in conv.messages:
        lines += [f"## {ROLE_NAMES.get(m.role, m.role.title())}", ""]
        for n, p in enumerate(m.images, 1):
            link = (images or {}).get(p)
            lines += [f"![image {n}](<{link}>)" if link else f"*[image {n}: {Path(p).name}]*", ""]
        lines += [m.content.rstrip(), ""]
        summary = stats_line(m.stats)
        if summary:
            lines += [f"<sub>{summary}</sub>", ""]
    return "\n".join(lines).rstrip() + "\n"


def to_json(conv: Conversation) -> str:
    """The conversation as saved, tagged with its format name and version; each message with
    images also carries them as data URLs (an image whose file is gone: null)."""
    data = conv.to_dict()
    for m in data["messages"]:
        if m.get("images"):
            m["image_data"] = [_data_url(p) for p in m["images"]]
    return json.dumps({"format": "omnidesk.conversation", **data}, ensure_ascii=False, indent=2) + "\n"


MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp", ".gif": "image/gif", ".bmp": "image/bmp"}


def _data_url(path: str) -> str | None:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    return f"data:{MIME.get(Path(path).suffix.lower(), 'application/octet-stream')};base64,{base64.b64encode(data).decode()}"


def _copy_images(conv: Conversation, path: Path) -> dict[str, str]:
    """Copy the conversation's images into "<name> images/" beside `path`; their relative links."""
    stored = [p for m in conv.messages for p in m.images]
    if not stored:
        return {}
    folder = path.with_name(f"{path.stem} images")
    links: dict[str, str] = {}
    for p in stored:
        if p in links or not Path(p).is_file():
            continue
        folder.mkdir(exist_ok=True)
        shutil.copyfile(p, folder / Path(p).name)
        links[p] = f"{folder.name}/{Path(p).name}"
    return links


def format_for(path: Path | str) -> Format:
    """The export format a file name asks for: .json → JSON, anything else → Markdown."""
    return "json" if str(path).lower().endswith(".json") else "markdown"


def export(conv: Conversation, path: Path | str, fmt: Format | None = None) -> Path:
    """Write `conv` to `path` (atomically) as Markdown or JSON (by default from the suffix)."""
    path = Path(path)
    fmt = fmt or format_for(path)
    write_atomic(path, to_json(conv) if fmt == "json" else to_markdown(conv, _copy_images(conv, path)))
    return path
