"""Issue 19, item 4 (a conversation's images): a conversation file may name any path as an image
(/etc/passwd, a pipe, a file outside the app's storage). Only the image store's own files are read:
any other path reads as a missing image — in the request (a clear refusal, not a read of the file),
in exports (not copied) — and the images of a reply's request are read and decoded on a thread."""

from __future__ import annotations

import io
import json
import os
import threading

import pytest
from PIL import Image

from desktop.chat.conversations import ConversationStore
from desktop.chat.export import to_json
from desktop.chat.image_store import ImageStore
from desktop.chat.reply import Phase, Reply
from desktop.errors import InvalidRequest
from desktop.model.images import ImageData
from desktop.model.messages import parse_messages
from desktop.model.params import SamplingParams
from desktop.protocol import Done, TokenStats
from gw_helpers import run

pytestmark = [pytest.mark.hardening, pytest.mark.timeout(120)]


def png(color=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buf, "PNG")
    return buf.getvalue()


class Parsing:
    """A gateway that parses each request as Gateway.chat does and answers "ok"."""

    def __init__(self) -> None:
        self.parsed, self.threads = [], []

    def chat(self, messages, params, request_id=None, **kw):
        self.threads.append(threading.get_ident())
        self.parsed.append(parse_messages(messages))
        return Stream()

    async def cancel(self, request_id: str) -> None:
        pass


class Stream:
    request_id = "r1"

    def __aiter__(self):
        return self._events()

    async def _events(self):
        yield Done("r1", "ok", TokenStats(generated_tokens=1))


def saved_conversation(root, images: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    data = {"version": 1, "id": "c1", "title": "t", "messages": [{"role": "user", "content": "look", "images": images}]}
    (root / "c1.json").write_text(json.dumps(data))


def test_paths_outside_the_image_store_read_as_missing(tmp_path):
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(png())
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    moved = ImageStore(tmp_path / "old-data" / "images")  # a stored image named from a data folder since moved
    own = moved.add(ImageData.from_bytes(png((1, 2, 3))))
    root = tmp_path / "conversations"
    ImageStore(root / "images").add(ImageData.from_bytes(png((1, 2, 3))))  # the same image is in this store
    saved_conversation(root, ["/etc/passwd", str(outside), str(fifo), str(own)])
    store = ConversationStore(root)
    paths = store.get("c1").messages[0].images
    assert all(p.startswith(str(store.images.root)) for p in paths), paths
    assert paths[3] == str(store.images.root / own.name)
    assert [os.path.exists(p) for p in paths] == [False, False, False, True]
    exported = json.loads(to_json(store.get("c1")))
    assert exported["messages"][0]["image_data"][:3] == [None, None, None]  # nothing outside was copied out


def test_a_reply_over_a_foreign_image_is_refused_as_missing(tmp_path):
    root = tmp_path / "conversations"
    saved_conversation(root, ["/etc/passwd"])
    store = ConversationStore(root)
    gateway = Parsing()
    reply = Reply(gateway, store, store.get("c1"), SamplingParams())
    run(reply.run())
    assert reply.phase is Phase.FAILED and not gateway.parsed
    code, message, _ = reply.error
    assert code == "invalid_request" and "(passwd) is missing" in message and "stored images" in message


def test_a_replys_stored_images_are_read_on_a_thread(tmp_path, monkeypatch):
    store = ConversationStore(tmp_path / "conversations")
    image = ImageData.from_bytes(png())
    path = store.images.add(image)
    saved_conversation(store.root, [str(path)])
    store = ConversationStore(store.root)
    decoded: list[int] = []
    real = ImageData.from_bytes.__func__
    monkeypatch.setattr(ImageData, "from_bytes",
                        classmethod(lambda cls, data, what="The image": decoded.append(threading.get_ident())
                                    or real(cls, data, what)))
    gateway = Parsing()

    async def main():
        reply = Reply(gateway, store, store.get("c1"), SamplingParams())
        await reply.run()
        return reply, threading.get_ident()

    from desktop.model import images as images_module

    images_module._read_cache.clear()
    reply, loop_thread = run(main())
    assert reply.phase is Phase.DONE and gateway.parsed[0][0].images == (image,)
    assert decoded and loop_thread not in decoded  # read and decoded on a thread, not on the loop


def test_reading_images_from_a_drive_that_stops_answering_is_given_up(tmp_path, monkeypatch):
    store = ImageStore(tmp_path / "images")
    release = threading.Event()
    monkeypatch.setattr(ImageStore, "resolve", lambda self, messages: release.wait() and messages)
    messages = [{"role": "user", "content": [{"type": "image", "path": str(tmp_path / "images" / ("ab" * 32 + ".png"))}]}]

    async def main():
        return await store.resolve_soon(messages, timeout_s=0.5)

    try:
        with pytest.raises(InvalidRequest, match="could not be read within 0.5 s"):
            run(main(), timeout=10)
    finally:
        release.set()


def test_images_inside_kept_branches_read_as_missing_too(tmp_path):
    """A branch kept under an edited message names its own images: they are pointed into the store
    as well, so switching to that branch never reads a file from elsewhere."""
    root = tmp_path / "conversations"
    root.mkdir(parents=True)
    branch = {"messages": [{"role": "user", "content": "first try", "images": ["/etc/passwd"]},
                           {"role": "assistant", "content": "ok"}]}
    data = {"version": 1, "id": "c1", "title": "t",
            "messages": [{"role": "user", "content": "second try", "branches": [branch], "branch": 1}]}
    (root / "c1.json").write_text(json.dumps(data))
    store = ConversationStore(root)
    kept = store.get("c1").messages[0].branches[0].messages[0]
    assert kept.images and all(p.startswith(str(store.images.root)) for p in kept.images), kept.images
