"""Images attached to conversations, kept in the conversations' own storage: one file per image,
named by its SHA-256 (so a branch and its parent share the file, and one image attached twice is
stored once), written atomically. A message refers to its images by these paths; the original
file the user picked may be moved or deleted afterwards. No Qt.

Only this store's own files are ever read as a conversation's images: a path that is not one of
its names (a conversation file may name anything: /etc/passwd, a pipe, /dev/zero) reads as missing."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from pathlib import Path
from typing import Any

from desktop.errors import InvalidRequest
from desktop.model.image_door import check_count
from desktop.model.images import ImageData, read_image
from desktop.safefile import write_atomic

log = logging.getLogger(__name__)

SUFFIXES = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "image/gif": ".gif", "image/bmp": ".bmp"}
_NAME = re.compile(r"^([0-9a-f]{64})(\.png|\.jpg|\.webp|\.gif|\.bmp|\.img)$")
NOT_STORED = "not-stored"  # where a path that is not one of ours points instead: nothing is ever there
READ_TIMEOUT_S = 30.0  # reading a request's stored images (≤ 16 × 20 MB) takes well under a second


class ImageStore:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path_for(self, image: ImageData) -> Path:
        return self.root / (image.sha256.hex() + SUFFIXES.get(image.mime, ".img"))

    def add(self, image: ImageData) -> Path:
        """Keep `image` (checked bytes) and return its stored path; an image already kept is not written again."""
        path = self.path_for(image)
        if not path.is_file() or path.stat().st_size != len(image.data):
            self.root.mkdir(parents=True, exist_ok=True)
            write_atomic(path, image.data)
        return path

    def own(self, path: Path | str) -> Path | None:
        """Where a stored image of this name lives in this store (a conversation saved before the
        data folder moved still finds its images), or None when `path` is not one of its names."""
        name = Path(str(path)).name
        return self.root / name if _NAME.match(name) else None

    def adopt(self, path: str) -> str:
        """A saved message's image path as this store reads it: its own file, or, for a path that is
        not one of its names, a path in the store where nothing is (shown and sent as missing)."""
        mine = self.own(path)
        if mine is not None:
            return str(mine)
        log.warning("A conversation names %r as an image; only stored images are read: shown as missing", path)
        return str(self.root / NOT_STORED / (Path(path).name or "image"))

    def load(self, path: Path | str, what: str = "The image") -> ImageData:
        """A stored image, checked (InvalidRequest: missing, damaged, or not one of this store's)."""
        mine = self.own(path)
        if mine is None:
            raise InvalidRequest(f"{what} ({Path(str(path)).name}) is missing: it is not one of the app's stored images.")
        image = read_image(mine, what)
        if image.sha256.hex() != _NAME.match(mine.name).group(1):  # type: ignore[union-attr]
            raise InvalidRequest(f"{what} ({mine.name}) is damaged: its file was changed after it was stored.")
        return image

    def resolve(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Request messages with each {"type": "image", "path": p} part read from this store into
        {"type": "image", "image": ImageData}: counted first, then each read and decoded. Slow
        for big images: run it off the event loop. InvalidRequest names the first one refused."""
        check_count(messages)
        out = []
        for i, m in enumerate(messages):
            content = m.get("content")
            if not isinstance(content, list) or not any(isinstance(p, dict) and "path" in p for p in content):
                out.append(m)
                continue
            parts, n = [], 0
            for p in content:
                if isinstance(p, dict) and p.get("type") == "image":
                    n += 1
                    if "path" in p:
                        p = {"type": "image", "image": self.load(p["path"], f"Image {n} of message {i + 1}")}
                parts.append(p)
            out.append({**m, "content": parts})
        return out

    async def resolve_soon(self, messages: list[dict[str, Any]], timeout_s: float = READ_TIMEOUT_S) -> list[dict[str, Any]]:
        """`resolve` on a thread of its own, waited for at most `timeout_s`: a drive that stops
        answering gives a clear refusal, and the app can still quit (the thread is a daemon, not
        one of the loop's executor threads that shutting down waits for)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if not done.done():
                done.set_exception(error) if error is not None else done.set_result(result)

        def run() -> None:
            try:
                result, error = self.resolve(messages), None
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting coroutine
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(settle, result, error)
            except RuntimeError:  # the loop closed meanwhile: nobody waits any more
                pass

        threading.Thread(target=run, name="image-read", daemon=True).start()
        try:
            return await asyncio.wait_for(done, timeout_s)
        except asyncio.TimeoutError:
            raise InvalidRequest(f"The conversation's images could not be read within {timeout_s:g} s: "
                                 f"is the drive of {self.root} answering?", retryable=True) from None
