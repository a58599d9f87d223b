"""Chat with images (issue 11, part 2) on a real gateway over the tiny vision model: attach by
button, drop and paste; thumbnails in the composer and in the message; images copied into the
conversation's storage and shown again after a restart; refusals that keep the text; a text
follow-up that reuses the image's KV; exports that keep the images."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QImage
from PySide6.QtTest import QTest

from desktop.chat import export as exporter
from desktop.chat.conversations import ConversationStore
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.chat import composer as composer_module
from desktop.ui.chat import dialogs
from desktop.workers.config import WorkerConfig
from ui_helpers import start_gateway


def png_bytes(color=(200, 60, 20), size=(48, 36)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    img = Image.new("RGB", size, color)
    for x in range(size[0] // 2):  # a stripe, so the thumbnail is not one flat colour
        img.putpixel((x, size[1] // 2), (255, 255, 255))
    img.save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture
def vlm_gateway(aloop):
    gw = start_gateway(aloop, WorkerConfig(num_slots=2), model="tiny-vlm")
    yield gw
    aloop.run(gw.close())


@pytest.fixture
def page(vlm_gateway, tmp_path, qtbot) -> ChatPage:
    settings = Settings(temperature=0.0, max_tokens=8)
    page = ChatPage(vlm_gateway, ConversationStore(tmp_path / "conversations"), lambda: settings, supports_images=True)
    qtbot.addWidget(page)
    page.resize(1000, 700)
    page.show()
    return page


async def idle(page: ChatPage) -> None:
    while page.busy or len(page.tasks):
        await asyncio.sleep(0.005)


def send(page: ChatPage, aloop, text: str) -> None:
    page.composer.edit.setPlainText(text)
    QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)
    aloop.run(idle(page))


def test_attach_send_and_follow_up_with_the_image_cached(page, aloop, tmp_path, monkeypatch, screenshot):
    picked = tmp_path / "holiday.png"
    picked.write_bytes(png_bytes())
    monkeypatch.setattr(dialogs, "ask_images", lambda parent: [str(picked)])
    page.composer.attach_button.click()
    assert len(page.composer.images) == 1 and len(page.composer.attachments.labels) == 1
    assert not page.composer.attachments.labels[0].pixmap().isNull()
    page.composer.edit.setPlainText("What is in this picture?")
    screenshot(page, "chat-image-composer")
    QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)
    aloop.run(idle(page))
    assert not page.composer.images and page.composer.attachments.isHidden()
    conv = page.store.get(page.current_conversation_id)
    stored = conv.messages[0].images
    assert len(stored) == 1 and Path(stored[0]).read_bytes() == picked.read_bytes()
    assert Path(stored[0]).parent == page.store.images.root  # a copy in the conversations' storage
    picked.unlink()  # the user's own file may go: the conversation keeps its copy
    assert [m.role for m in conv.messages] == ["user", "assistant"] and conv.messages[1].stats["kind"] in ("miss", "spc")
    widgets = page.view.widgets()
    assert len(widgets[0].thumbnails.labels) == 1 and not widgets[0].thumbnails.labels[0].pixmap().isNull()
    send(page, aloop, "Tell me more about it.")
    follow = page.store.get(page.current_conversation_id).messages[-1].stats
    assert follow["kind"] in ("extend", "hit") and follow["cached_tokens"] > 16  # the image's 16 positions kept
    screenshot(page, "chat-image-sent")
    # a restart: the same conversation shows its image again, from the store's copy
    again = ChatPage(page.gateway, ConversationStore(page.store.root), lambda: Settings(), supports_images=True)
    again.open_conversation(page.current_conversation_id)
    first = again.view.widgets()[0]
    assert len(first.thumbnails.labels) == 1 and not first.thumbnails.labels[0].pixmap().isNull()
    again.deleteLater()


def test_paste_and_drop_attach_images_and_the_x_removes_one(page, tmp_path):
    mime = QMimeData()
    image = QImage(20, 20, QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.blue)
    mime.setImageData(image)
    page.composer.edit.setPlainText("kept text")
    page.composer.edit.insertFromMimeData(mime)  # what Ctrl+V does
    assert len(page.composer.images) == 1 and page.composer.edit.toPlainText() == "kept text"
    dropped = tmp_path / "dropped.jpg"
    from PIL import Image

    Image.new("RGB", (30, 20), (0, 200, 0)).save(dropped, "JPEG")
    files = QMimeData()
    files.setUrls([QUrl.fromLocalFile(str(dropped))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, files, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    page.composer.dropEvent(event)
    assert len(page.composer.images) == 2 and page.composer.images[1].mime == "image/jpeg"
    page.composer.attachments.removed.emit(0)
    assert [im.mime for im in page.composer.images] == ["image/jpeg"]


def test_refusals_say_why_and_keep_the_text(page, tmp_path, monkeypatch):
    said: list[str] = []
    page.composer.refused.connect(said.append)
    page.composer.edit.setPlainText("my words")
    not_image = tmp_path / "notes.png"
    not_image.write_text("just text")
    assert page.composer.add_images([("notes.png", None, str(not_image))]) == 0
    assert "not an image" in said[-1]
    big = tmp_path / "huge.png"
    big.write_bytes(b"\0" * (21 * 2**20))
    assert page.composer.add_images([("huge.png", None, str(big))]) == 0 and "limit is 20 MB" in said[-1]
    many = [(f"{i}.png", png_bytes((i, 0, 0)), None) for i in range(composer_module.MAX_ATTACHED + 1)]
    assert page.composer.add_images(many) == composer_module.MAX_ATTACHED and "at most" in said[-1]
    page.composer.set_supports_images(False)  # the model changed to one that cannot see images
    assert not page.composer.images and "cannot see images" in said[-1]
    assert page.composer.add_images([("x.png", png_bytes(), None)]) == 0 and "cannot see images" in said[-1]
    assert page.composer.edit.toPlainText() == "my words"  # never lost


def test_exports_keep_the_images(page, aloop, tmp_path):
    page.composer.add_images([("a.png", png_bytes(), None)])
    send(page, aloop, "Look")
    conv = page.store.get(page.current_conversation_id)
    data = json.loads(exporter.to_json(conv))
    url = data["messages"][0]["image_data"][0]
    assert url.startswith("data:image/png;base64,")
    import base64

    assert base64.b64decode(url.split(",", 1)[1]) == png_bytes()
    md = exporter.export(conv, tmp_path / "out" / "chat.md") if (tmp_path / "out").mkdir() is None else None
    text = md.read_text()
    copy = tmp_path / "out" / "chat images" / Path(conv.messages[0].images[0]).name
    assert copy.read_bytes() == png_bytes() and f"(<chat images/{copy.name}>)" in text
