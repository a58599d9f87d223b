"""Hostile content in replies and user text (issue 8, item 10): links open only after a
confirmation that shows the whole address, and only web and email links; nothing is ever loaded
into a reply; titles and other user text show literally, never as markup."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt, QTimer, QUrl
from PySide6.QtGui import QDesktopServices, QImage, QPixmap, QTextCursor, QTextDocument
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.chat.conversation_model import ConversationListModel
from desktop.ui.chat.links import LinkDialog
from desktop.ui.chat.message_widget import MessageWidget

pytestmark = pytest.mark.hardening

HOSTILE = {
    "jslink": "javascript:alert(document.cookie)",
    "msdtlink": "ms-msdt:/id PCWDiagnostic /skip force /param IT_RebrowseForFile=?",
    "smblink": "smb://10.0.0.1/share/payload.exe",
    "filelink": "file:///etc/passwd",
    "datalink": "data:text/html,<script>alert(1)</script>",
    "rellink": "notes/secret.html",
}
LONG = "https://docs.example.org/guide/section/subsection/page.html?utm_source=reply&session=0123456789abcdef#part-two"


@pytest.fixture
def opened(monkeypatch) -> list[QUrl]:
    """Every URL handed to the operating system (nothing really opens)."""
    urls: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: urls.append(QUrl(url)) or True)
    return urls


def reply(qtbot, text: str) -> MessageWidget:
    widget = MessageWidget("assistant", text, 1)
    qtbot.addWidget(widget)
    widget.resize(720, 300)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def click_word(view, word: str) -> None:
    """A left click on the middle of `word` in a text view, as a user would do."""
    cursor = view.document().find(word)
    assert not cursor.isNull(), word
    middle = QTextCursor(view.document())
    middle.setPosition(cursor.selectionStart() + len(word) // 2)
    point = view.cursorRect(middle).center() + QPoint(2, 0)
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, point)


def link_dialogs() -> list[LinkDialog]:
    return [w for w in QApplication.topLevelWidgets() if isinstance(w, LinkDialog) and w.isVisible()]


def test_hostile_links_open_nothing_and_leave_the_reply_as_it_was(qtbot, opened):
    text = "Try these: " + " · ".join(f"[{word}]({url})" for word, url in HOSTILE.items())
    widget = reply(qtbot, text)
    view = widget.body
    before = view.document().toPlainText()
    for word, url in HOSTILE.items():
        click_word(view, word)  # a click, as the user would
        view.anchorClicked.emit(QUrl(url))  # and the same link activated some other way (keyboard)
        QApplication.processEvents()
        assert opened == [], f"{word} was handed to the operating system"
        assert link_dialogs() == [], f"{word} asked to be opened"
        assert view.document().toPlainText() == before and view.text() == text, f"{word} changed the reply"
    # shown as text: not underlined or clickable
    for word in HOSTILE:
        cursor = view.document().find(word)
        assert not cursor.charFormat().isAnchor(), word


def test_a_web_link_asks_first_showing_the_whole_address(qtbot, opened, screenshot):
    widget = reply(qtbot, f"The guide is [here]({LONG}); or [mail us](mailto:help@example.org).")
    view = widget.body
    click_word(view, "here")
    qtbot.waitUntil(lambda: len(link_dialogs()) == 1)
    dialog = link_dialogs()[0]
    assert opened == []  # nothing opens before the user says so
    assert dialog.address.toPlainText() == LONG and "docs.example.org" in dialog.site.text()
    assert dialog.cancel_button.isDefault()
    qtbot.waitExposed(dialog)
    screenshot(dialog, "hardening-link-confirmation")
    dialog.cancel_button.click()
    assert opened == [] and link_dialogs() == []

    click_word(view, "here")
    qtbot.waitUntil(lambda: len(link_dialogs()) == 1)
    link_dialogs()[0].open_button.click()
    assert [u.toString() for u in opened] == [LONG]

    click_word(view, "mail")
    qtbot.waitUntil(lambda: len(link_dialogs()) == 1)
    dialog = link_dialogs()[0]
    assert dialog.address.toPlainText() == "mailto:help@example.org" and "mail app" in dialog.findChildren(QLabel)[0].text()
    dialog.open_button.click()
    assert opened[-1].toString() == "mailto:help@example.org"


def test_the_dialog_shows_where_a_link_really_goes(qtbot, opened):
    widget = reply(qtbot, "[https://bank.example](https://bank.example.evil.test/login) and "
                          "[shop](https://аpple.example/)")  # the second "а" is Cyrillic
    click_word(widget.body, "bank")
    qtbot.waitUntil(lambda: len(link_dialogs()) == 1)
    dialog = link_dialogs()[0]
    assert dialog.address.toPlainText() == "https://bank.example.evil.test/login"
    dialog.reject()
    click_word(widget.body, "shop")
    qtbot.waitUntil(lambda: len(link_dialogs()) == 1)
    dialog = link_dialogs()[0]
    assert dialog.address.toPlainText().startswith("https://xn--") and "xn--" in dialog.site.text()
    dialog.reject()
    assert opened == []


def test_images_and_html_in_a_reply_load_nothing(qtbot, tmp_path):
    png = tmp_path / "local.png"
    image = QImage(8, 8, QImage.Format.Format_RGB32)
    image.fill(0xFF0000)
    assert image.save(str(png))
    local = QUrl.fromLocalFile(str(png)).toString()
    text = (f"Look: ![a local picture]({local}) ![remote pixel](http://127.0.0.1:9/pixel.png) ![]({local}) "
            "<img src='file:///etc/passwd'> <b>not bold</b> <a href='javascript:x()'>raw</a>")
    widget = reply(qtbot, text)
    doc = widget.body.document()
    shown = doc.toPlainText()
    assert "[image: a local picture]" in shown and "[image: remote pixel]" in shown
    assert "<img src='file:///etc/passwd'>" in shown and "<b>not bold</b>" in shown  # raw HTML is text
    block, formats = doc.begin(), []
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            formats.append(it.fragment().charFormat())
            it += 1
        block = block.next()
    assert not any(f.isImageFormat() for f in formats) and not any(f.isAnchor() for f in formats)
    # even asked directly, the view hands out nothing: Qt would otherwise read the file itself
    for url in (local, "file:///etc/passwd", "http://127.0.0.1:9/pixel.png"):
        res = doc.resource(QTextDocument.ResourceType.ImageResource, QUrl(url))
        assert not isinstance(res, (QImage, QPixmap)) or res.isNull(), url
        assert not res, url


def answer_next_box(found: list) -> None:
    """Record and close the next message box, whether it was opened or exec()'d."""
    def look() -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            QTimer.singleShot(20, look)
            return
        label = box.findChild(QLabel, "qt_msgbox_label")
        found.append((box.text(), label.textFormat(), label.text()))
        box.reject()

    QTimer.singleShot(20, look)


def test_a_title_shows_literally_in_the_delete_confirmation_and_the_list(qtbot, tmp_path):
    store = ConversationStore(tmp_path / "c")
    conv = store.new()
    conv.messages = [StoredMessage("user", "hello"), StoredMessage("assistant", "hi")]
    store.save(conv)
    title = "<b>Bold</b> <img src='file:///etc/passwd'> & <i>co</i>"
    store.rename(conv.id, title)
    page = ChatPage(object(), store, Settings)
    qtbot.addWidget(page)
    page.show()
    found: list = []
    answer_next_box(found)
    page.delete(conv.id)
    qtbot.waitUntil(lambda: bool(found), timeout=3000)
    text, fmt, label_text = found[0]
    assert title in text and fmt == Qt.TextFormat.PlainText
    assert conv.id in store  # cancelled
    model: ConversationListModel = page.conversations.model
    tip = model.data(model.index(0, 0), Qt.ItemDataRole.ToolTipRole)
    assert rendered(tip).startswith(title)


def rendered(tip: str) -> str:
    """What a tooltip shows: Qt renders text that looks like HTML as HTML."""
    doc = QTextDocument()
    doc.setHtml(tip) if GuiQt.mightBeRichText(tip) else doc.setPlainText(tip)
    return doc.toPlainText()
