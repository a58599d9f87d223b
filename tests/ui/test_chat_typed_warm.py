"""Typing in the composer prefills the draft at each pause (≈500 ms) on a real gateway over the
tiny model; Send then reads only what changed, and the reply's badge says how many of its tokens
were prefilled while typing. Turned off in the settings, nothing is prefilled."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from desktop.chat.conversations import ConversationStore
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.chat.page import TYPING_PAUSE_MS
from desktop.workers.config import WorkerConfig
from ui_helpers import start_gateway


class Spy:
    """The real gateway; the warms (max_tokens 0) it was asked for are kept."""

    def __init__(self, gw) -> None:
        self.gw, self.warms = gw, []

    def chat(self, messages, params, **kw):
        if params.max_tokens == 0:
            self.warms.append(messages[-1]["content"])
        return self.gw.chat(messages, params, **kw)

    def __getattr__(self, name):
        return getattr(self.gw, name)


async def idle(page: ChatPage) -> None:
    while page.busy or len(page.tasks):
        await asyncio.sleep(0.005)


def typed_reply(aloop, tmp_path, qtbot, settings: Settings):
    """Say one thing, then type the next message with a pause in the middle and send it."""
    gw = start_gateway(aloop, WorkerConfig(num_slots=2, cache_min_tokens=4))
    spy = Spy(gw)
    page = ChatPage(spy, ConversationStore(tmp_path / "conversations"), lambda: settings)
    qtbot.addWidget(page)
    page.resize(900, 560)
    page.show()
    try:
        page.composer.edit.setPlainText("Tell me about the sea.")
        QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)
        aloop.run(idle(page))
        QTest.keyClicks(page.composer.edit, "What about rivers")
        aloop.run(asyncio.sleep(TYPING_PAUSE_MS / 1000 + 0.5))  # a pause: the draft goes out, and is read
        QTest.keyClicks(page.composer.edit, " and lakes?")
        QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)  # sent before the next pause ends
        aloop.run(idle(page))
        return page, spy
    finally:
        aloop.run(gw.close())


def test_a_pause_in_typing_prefills_the_draft_and_the_badge_says_so(aloop, tmp_path, qtbot, screenshot):
    page, spy = typed_reply(aloop, tmp_path, qtbot, Settings(temperature=0.0, max_tokens=12))
    assert spy.warms == ["What about rivers"]
    stats = page.conv.messages[-1].stats
    assert stats["typed_tokens"] > 0 and stats["cached_tokens"] == stats["history_tokens"] + stats["typed_tokens"]
    badge = page.view.widgets()[-1].badge
    assert f" · {stats['typed_tokens']} tokens prefilled while typing" in badge.text(), badge.text()
    assert f"Your message: {stats['typed_tokens']} tokens prefilled while you typed" in badge.toolTip()
    screenshot(page, "chat_typed_prefill")
    first = page.view.widgets()[1].badge  # the first reply was not typed with a pause: nothing said
    assert "while typing" not in first.text()


def test_turned_off_nothing_is_prefilled(aloop, tmp_path, qtbot):
    page, spy = typed_reply(aloop, tmp_path, qtbot, Settings(temperature=0.0, max_tokens=12, prefill_while_typing=False))
    assert spy.warms == [] and "while typing" not in page.view.widgets()[-1].badge.text()


def test_the_settings_dialog_turns_it_off(qtbot, screenshot):
    from desktop.ui.settings_dialog import SettingsDialog

    dlg = SettingsDialog(Settings(), sound_devices=[])
    qtbot.addWidget(dlg)
    dlg.open()
    qtbot.waitExposed(dlg)
    page = next(p for p in dlg.pages if hasattr(p, "typing"))
    dlg.tabs.setCurrentWidget(page)
    assert page.typing.isChecked()
    page.typing.setChecked(False)
    screenshot(dlg, "settings_prefill_while_typing")
    with qtbot.waitSignal(dlg.applied) as sig:
        qtbot.mouseClick(dlg.ok_button, Qt.MouseButton.LeftButton)
    assert sig.args[0].prefill_while_typing is False
