"""Issue 19, item 4 (a conversation's images, on screen): a conversation file that names an image
outside the app's image store (a real picture elsewhere, /etc/passwd) or a pipe in its place shows
"(image missing)" in the message: nothing outside the store is read, and nothing blocks the Qt thread."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from PIL import Image

from desktop.chat.conversations import ConversationStore
from desktop.ui.chat.message_widget import MessageWidget

pytestmark = [pytest.mark.hardening, pytest.mark.timeout(60)]
SHOTS = Path("/tmp/shots")


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (30, 120, 220)).save(buf, "PNG")
    return buf.getvalue()


def load(tmp_path: Path, images: list[str]) -> list[str]:
    root = tmp_path / "conversations"
    root.mkdir(parents=True, exist_ok=True)
    data = {"version": 1, "id": "c1", "messages": [{"role": "user", "content": "What is in these?", "images": images}]}
    (root / "c1.json").write_text(json.dumps(data))
    return ConversationStore(root).get("c1").messages[0].images


def labels_of(widget: MessageWidget) -> list[str]:
    return [label.text() if label.pixmap().isNull() else "(picture)" for label in widget.thumbnails.labels]


def test_images_outside_the_store_show_as_missing(qtbot, tmp_path):
    elsewhere = tmp_path / "holiday.png"
    elsewhere.write_bytes(png())  # a real picture, but not one the app stored: not read
    widget = MessageWidget("user", "What is in these?", 0, images=load(tmp_path, ["/etc/passwd", str(elsewhere)]))
    qtbot.addWidget(widget)
    widget.resize(520, widget.sizeHint().height())
    widget.show()
    SHOTS.mkdir(exist_ok=True)
    widget.grab().save(str(SHOTS / "foreign-images-missing.png"))
    assert labels_of(widget) == ["(image missing)", "(image missing)"]
    assert [label.toolTip() for label in widget.thumbnails.labels] == ["passwd", "holiday.png"]


def test_a_pipe_in_the_image_store_shows_as_missing_without_blocking(qtbot, tmp_path):
    store = tmp_path / "conversations" / "images"
    store.mkdir(parents=True)
    fifo = store / ("ab" * 32 + ".png")  # named like a stored image
    os.mkfifo(fifo)
    widget = MessageWidget("user", "look", 0, images=load(tmp_path, [str(fifo)]))
    qtbot.addWidget(widget)
    assert labels_of(widget) == ["(image missing)"]
