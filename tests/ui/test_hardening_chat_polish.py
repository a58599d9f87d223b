"""Issue 19, new-user item 9 (the chat's polish): the status bar named internal states ("1 worker:
duplex_active"); the export dialog opened in the app's source folder; errors numbered messages as
the request does ("Message 2 is 70,289 characters long": the system prompt is message 1) and gave a
token count in the headline (8,745) other than the detail's (8790, no separator); F1 was taller than
the window and cut a row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PySide6.QtCore import QStandardPaths
from PySide6.QtWidgets import QFileDialog, QWidget

from desktop.chat.conversations import Conversation, ConversationStore, StoredMessage
from desktop.settings import Settings
from desktop.gateway.monitor import Snapshot, WorkerRow
from desktop.protocol.engine_stats import QueueStats, RequestCounts
from desktop.ui.chat import ChatPage, dialogs
from desktop.ui.chat.notice import too_long
from desktop.ui.main_window import MainWindow
from desktop.ui.status_bar import StatusBar, worker_summary
from test_chat_page import make_page, say

pytestmark = pytest.mark.hardening


def row(state: str) -> WorkerRow:
    return WorkerRow("gpu0", state, "cuda:0", 0, 4, 1, 4, 1, "")


# ----------------------------------------------------------------------------- status bar


def test_the_status_bar_says_worker_states_in_plain_words(qtbot):
    assert worker_summary([row("duplex_active")]) == "1 worker: in a call"
    assert worker_summary([row("duplex_paused")]) == "1 worker: call paused"
    assert worker_summary([row("idle"), row("duplex_active")]) == "2 workers: 1 idle, 1 in a call"
    assert worker_summary([row("duplex_active"), row("duplex_active")]) == "2 workers: in a call"
    bar = StatusBar()
    qtbot.addWidget(bar)
    bar.resize(900, 28)
    bar.show()
    bar.show_snapshot(Snapshot([row("duplex_active")], [], [], {}, RequestCounts(), {}, {}))
    assert bar.workers_label.text() == "1 worker: in a call" and "_" not in bar.workers_label.toolTip()
    qtbot.waitUntil(lambda: bar.workers_label.width() >= bar.workers_label.sizeHint().width())
    bar.grab().save("/tmp/shots/status-bar-in-a-call.png")


# ----------------------------------------------------------------------------- export


def test_the_export_dialog_opens_in_the_documents_folder(qtbot, monkeypatch):
    asked: list[str] = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda _parent, _caption, where, _filters: asked.append(where) or ("", ""))
    parent = QWidget()
    qtbot.addWidget(parent)
    assert dialogs.ask_export_path(parent, "Trip: Lisbon") is None
    (where,) = asked
    docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    folder = Path(docs) if docs and Path(docs).is_dir() else Path.home()
    assert Path(where) == folder / "Trip Lisbon.md"


# ----------------------------------------------------------------------------- errors


def test_errors_name_messages_as_the_user_knows_them():
    from desktop.ui.chat.notice import in_user_terms  # (new in issue 19)

    conv = Conversation(id="c" * 32, system_prompt="Be brief.")
    conv.messages = [StoredMessage("user", "Hi"), StoredMessage("assistant", "Hello!"), StoredMessage("user", "x" * 70_289)]
    limit = "the limit is 16,384 characters. Shorten it or send it in parts."
    assert in_user_terms(f"Message 4 is 70,289 characters long; {limit}", conv) == \
        f"Your message is 70,289 characters long; {limit}"
    assert in_user_terms("Message 2 (user) contains U+D800", conv) == "Your 1st message (user) contains U+D800"
    assert in_user_terms("Message 3 is long", conv) == "The assistant's 1st reply is long"
    assert in_user_terms("Message 1 is long", conv) == "The system prompt is long"
    over = "This conversation is 8790 tokens long; the model's context window is 8192 tokens."
    shown = in_user_terms(over, conv)
    assert shown == "This conversation is 8,790 tokens long; the model's context window is 8,192 tokens."
    headline = too_long(over, 30_000, 30_200, alone=False)
    assert re.findall(r"\d[\d,]*", headline) == ["8,790", "8,192"]  # the detail's numbers, not an estimate


def test_a_paste_too_long_says_your_message(two_slot_gateway, tmp_path, aloop, qtbot):
    page = make_page(two_slot_gateway, tmp_path, Settings(temperature=0.0, max_tokens=12), qtbot)
    aloop.run(say(page, "Hello"))
    aloop.run(say(page, " ".join(["word"] * 5_000)))  # 24,999 characters: over the tiny model's 16,384
    notice = page.view.notice()
    assert notice is not None and notice.detail.text().startswith("Your message is 24,999 characters long")
    assert "Message" not in notice.detail.text()


# ----------------------------------------------------------------------------- F1


def test_f1_fits_the_window_and_scrolls_what_does_not(qtbot, tmp_path):
    window = MainWindow(Settings(), lambda: None)
    qtbot.addWidget(window)
    window.set_chat_page(ChatPage(object(), ConversationStore(tmp_path / "c"), Settings))
    window.resize(1000, 520)
    window.show()
    qtbot.waitExposed(window)
    dialog = window.show_shortcuts()
    qtbot.waitExposed(dialog)
    table = dialog.table
    assert dialog.frameGeometry().height() <= window.frameGeometry().height()
    rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
    assert rows > table.viewport().height() and table.verticalScrollBar().isVisible()  # it scrolls
    assert table.columnWidth(1) >= table.sizeHintForColumn(1)  # no action cut short ("…")
    dialog.grab().save("/tmp/shots/f1-in-a-small-window.png")
    dialog.close()
