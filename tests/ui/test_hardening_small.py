"""Smaller things a user met (issue 8, item 15): search over message text with dates in the list,
F1 listing every bound key, the voice toggle without a sound device, Help → Open log folder,
the window title, and cache badges that tell the true reason."""

from __future__ import annotations

import asyncio
import time

import pytest
from PySide6.QtCore import QPoint, Qt, QUrl
from PySide6.QtGui import QAction, QDesktopServices, QGuiApplication, QKeySequence, QPainter
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QMessageBox, QToolTip

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.speech.voice import Voice
from desktop.media.devices import NO_OUTPUT
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.chat.conversation_model import DATE_ROLE, DETAIL_ROLE
from desktop.ui.main_window import MainWindow
from desktop.ui.shortcuts import SHORTCUTS, ShortcutsDialog
from ui_helpers import start_gateway

pytestmark = pytest.mark.hardening

NOTE = {"input_tokens": 50, "cached_tokens": 40, "generated_tokens": 9, "kind": "extend", "finish_reason": "eos"}


# ----------------------------------------------------------------------------- search


@pytest.fixture
def trips(tmp_path) -> ConversationStore:
    """Three conversations with the same title: only their messages tell them apart."""
    store = ConversationStore(tmp_path / "conversations")
    for reply in ("Try the grilled sardines in Alfama.", "In Valencia, order a real Paella at lunch.",
                  "Pack light: the trains have little room."):
        conv = store.new("Be brief.")
        conv.messages = [StoredMessage("user", "Plan a trip"), StoredMessage("assistant", reply, NOTE)]
        store.save(conv)
        time.sleep(0.002)  # distinct update times: a stable order
    return store


def details(page: ChatPage) -> list[str]:
    """Each row's date and second line, as "date · line"."""
    model = page.conversations.model
    return [f"{model.data(model.index(r, 0), DATE_ROLE)} · {model.data(model.index(r, 0), DETAIL_ROLE)}"
            for r in range(model.rowCount())]


def test_search_finds_message_text_and_the_list_shows_dates(trips, qtbot, screenshot):
    page = ChatPage(object(), trips, Settings)
    qtbot.addWidget(page)
    page.resize(1000, 600)
    page.show()
    assert all(d.startswith("Today ") and "2 messages" in d for d in details(page))  # dates tell them apart
    QTest.keyClicks(page.conversations.search, "paella")
    qtbot.waitUntil(lambda: page.conversations.model.rowCount() == 1)  # searches once typing pauses
    (detail,) = details(page)
    assert detail.startswith("Today ") and "Paella" in detail
    page.conversations.search.setText("trip light")  # every word, title and text together
    page.conversations.flush_search()
    assert len(details(page)) == 1 and "light" in details(page)[0]
    page.conversations.search.setText("trip")
    page.conversations.flush_search()
    assert len(details(page)) == 3
    page.conversations.search.setText("in")
    page.conversations.flush_search()
    assert len(details(page)) == 3 and all("in" in d.split(" · ", 1)[1].lower() for d in details(page))
    screenshot(page.conversations, "hardening-search-with-dates")


def test_search_stays_fast_with_many_conversations(tmp_path):
    store = ConversationStore(tmp_path / "many")
    text = "lorem ipsum dolor sit amet consectetur " * 12
    for i in range(300):
        conv = store.new()
        conv.messages = [StoredMessage("user" if j % 2 == 0 else "assistant", f"{text} {i}-{j}") for j in range(20)]
        store._convs[conv.id] = conv  # in memory only: writing 300 files would be the slow part
    store.find("warm")  # the index is built once
    start = time.perf_counter()
    hits = store.find("nothing matches this")
    assert hits == [] and time.perf_counter() - start < 0.05


# ----------------------------------------------------------------------------- F1


def test_f1_lists_every_bound_shortcut(qtbot, tmp_path, screenshot):
    window = MainWindow(Settings(), lambda: None)
    qtbot.addWidget(window)
    page = ChatPage(object(), ConversationStore(tmp_path / "c"), Settings, voice=Voice.unavailable(NO_OUTPUT))
    window.set_chat_page(page)
    window.show()
    qtbot.waitExposed(window)
    dialog = window.show_shortcuts()
    assert isinstance(dialog, ShortcutsDialog)
    listed = dialog.listed()
    shown_keys = set(listed.values())
    bound = {a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
             for a in window.findChildren(QAction) if not a.shortcut().isEmpty()}
    bound |= {b.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
              for b in window.findChildren(QAbstractButton) if not b.shortcut().isEmpty()}
    assert bound and bound <= shown_keys, f"bound but not in the help: {bound - shown_keys}"
    assert {"Enter", "Shift+Enter", "Ctrl+Shift+V", "Esc", "F2", "Del"} <= shown_keys
    # the keys the help names are the keys the composer acts on
    sent: list[str] = []
    page.composer.send_requested.disconnect(page.send)  # no model here: only see what would be sent
    page.composer.send_requested.connect(lambda text, _images: sent.append(text))
    edit = page.composer.edit
    edit.setPlainText("one")
    edit.moveCursor(edit.textCursor().MoveOperation.End)
    QTest.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert edit.toPlainText() == "one\n" and sent == []
    QTest.keyClick(edit, Qt.Key.Key_Return)
    assert sent == ["one"]
    assert set(listed) == {s.text.rstrip("…") for s in SHORTCUTS}
    qtbot.waitExposed(dialog)
    screenshot(dialog, "hardening-f1-help")
    dialog.close()


# ----------------------------------------------------------------------------- voice


def test_the_voice_toggle_without_a_sound_device_says_why(qtbot, tmp_path, screenshot):
    page = ChatPage(object(), ConversationStore(tmp_path / "c"), lambda: Settings(voice_enabled=True),
                    voice=Voice.unavailable(NO_OUTPUT))
    qtbot.addWidget(page)
    page.resize(900, 560)
    page.show()
    qtbot.waitExposed(page)
    said: list[str] = []
    page.status.connect(said.append)
    button = page.speech.button
    assert button.toolTip() == "Audio is off: No sound output device found"
    QApplication.processEvents()
    said.clear()
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    assert not button.isChecked()
    assert said == ["Audio is off: No sound output device found"]
    assert QToolTip.isVisible() and QToolTip.text() == "Audio is off: No sound output device found"
    shot = page.grab()
    tip = next(w for w in QApplication.topLevelWidgets() if w.inherits("QTipLabel") and w.isVisible())
    painter = QPainter(shot)
    painter.drawPixmap(page.mapFromGlobal(tip.mapToGlobal(QPoint(0, 0))), tip.grab())
    painter.end()
    shot.save(str(screenshot(page, "hardening-voice-unavailable")))  # the page with the notice drawn in
    QToolTip.hideText()
    page.toggle_voice()  # Ctrl+Shift+V / the menu: the same answer
    assert said[-1] == "Audio is off: No sound output device found" and not button.isChecked()


# ----------------------------------------------------------------------------- log folder, title


@pytest.fixture
def log_folder(tmp_path, monkeypatch):
    folder = tmp_path / "logs here"
    monkeypatch.setenv("OMNIDESK_LOG_DIR", str(folder))
    return folder


def open_log_action(window: MainWindow) -> QAction:
    return next(a for a in window.findChildren(QAction) if a.text() == "Open log folder")


def test_open_log_folder_opens_it_or_says_where_it_is(qtbot, log_folder, monkeypatch):
    window = MainWindow(Settings(), lambda: None)
    qtbot.addWidget(window)
    window.show()
    asked: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: asked.append(QUrl(url)) or True)
    open_log_action(window).trigger()
    assert [u.toLocalFile() for u in asked] == [str(log_folder)] and log_folder.is_dir()
    assert not [b for b in window.findChildren(QMessageBox) if b.isVisible()]

    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: asked.append(QUrl(url)) and False)
    open_log_action(window).trigger()
    boxes = [b for b in window.findChildren(QMessageBox) if b.isVisible()]
    assert len(boxes) == 1
    box = boxes[0]
    assert str(log_folder) in box.text()
    label = box.findChild(QLabel, "qt_msgbox_label")
    assert label.textInteractionFlags() & Qt.TextInteractionFlag.TextSelectableByMouse
    copy = next(b for b in box.buttons() if b.text() == "Copy path")
    copy.click()
    assert QGuiApplication.clipboard().text() == str(log_folder)


def as_x11_shows(title: str, display_name: str) -> str:
    """QPlatformWindow::formatWindowTitle: X11 and Windows append the app's display name."""
    return title if title.endswith(display_name) else f"{title} \u2014 {display_name}"


def test_the_window_title_names_omnidesk_once(qtbot):
    window = MainWindow(Settings(), lambda: None)
    qtbot.addWidget(window)
    for name in (None, "SmolLM2-135M-Instruct"):
        window.set_model(name)
        shown = as_x11_shows(window.windowTitle(), "Omnidesk")
        assert shown.count("Omnidesk") == 1, shown
        assert name is None or name in shown


# ----------------------------------------------------------------------------- badge reasons


@pytest.fixture
def small_gateway(aloop):
    gw = start_gateway(aloop)
    yield gw
    aloop.run(gw.close())


async def say(page: ChatPage, text: str) -> str:
    """Send as the user does and return the reply's badge line."""
    page.composer.edit.setPlainText(text)
    QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)
    while page.busy or len(page.tasks):
        await asyncio.sleep(0.005)
    return page.view.widgets()[-1].badge.text()


def test_badge_reasons_are_true(small_gateway, aloop, tmp_path, qtbot):
    settings = Settings(temperature=0.0, max_tokens=6)
    page = ChatPage(small_gateway, ConversationStore(tmp_path / "c"), lambda: settings)
    qtbot.addWidget(page)
    page.show()
    assert page.conv.system_prompt  # the default preset: conversations share a system prompt

    async def scenario() -> dict[str, str]:
        badges = {"new": await say(page, "Hello there"), "follow-up": await say(page, "Tell me more")}
        page.edit(2)
        badges["edit"] = await say(page, "Tell me less")  # a branch: its own history, a new last message
        fork = page.current_conversation_id
        page.new_conversation()
        badges["new, same system prompt"] = await say(page, "Another topic")
        page.open_conversation(fork)  # two slots: the new chat took this branch's slot
        badges["follow-up, own cache gone"] = await say(page, "And then?")
        page.regenerate()
        while page.busy or len(page.tasks):
            await asyncio.sleep(0.005)
        badges["regenerate"] = page.view.widgets()[-1].badge.text()
        return badges

    badges = aloop.run(scenario(), 120)
    # one vocabulary (issue 19): the same words for the same situation, a reason on every line
    reason = {name: line.split(" · ")[3] for name, line in badges.items()}  # tokens · TTFT · speed · reason
    assert reason["new"] == reason["new, same system prompt"] == "new conversation", badges
    assert reason["edit"] == "edited"
    assert reason["follow-up, own cache gone"] == "evicted"  # its slot was given to the new chat
    assert reason["follow-up"] == reason["regenerate"] == "history cached", badges
    for name, line in badges.items():
        assert "branched" not in line, (name, line)
        assert name == "edit" or "edited" not in line, (name, line)


def test_the_text_boxs_hint_names_the_keys_only_when_they_fit(qtbot):
    """The hint is one line high: in a narrow box the keys' half wrapped out of sight, cut mid-word."""
    from desktop.ui.chat.composer import SHORT_PLACEHOLDER, ComposerEdit, placeholder

    edit = ComposerEdit()
    qtbot.addWidget(edit)
    edit.show()
    for width, wanted in ((900, placeholder()), (300, SHORT_PLACEHOLDER), (900, placeholder())):
        edit.resize(width, edit.height())
        qtbot.waitUntil(lambda: edit.viewport().width() > width - 40)
        assert edit.placeholderText() == wanted, (width, edit.placeholderText())
        assert edit.fontMetrics().horizontalAdvance(edit.placeholderText()) < edit.viewport().width()
