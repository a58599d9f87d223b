"""Issue 19, new-user item 7 (push-to-talk): right after Push-to-talk is chosen in the mode
dropdown, Space talks — the focus leaves the dropdown (where Space would open its list again)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from test_call_page import Owner, make_page, settle, started  # noqa: F401  (make_page: a fixture)

from desktop.call.state import CallMode

pytestmark = pytest.mark.hardening


def _choose_with_keys(page, qtbot) -> None:
    """Push-to-talk chosen as a user does: the dropdown focused, Down twice (Full duplex →
    Turn-taking → Push-to-talk), each an `activated` choice."""
    combo = page.controls.mode
    page.activateWindow()
    combo.setFocus()
    qtbot.waitUntil(combo.hasFocus, timeout=2000)
    QTest.keyClick(combo, Qt.Key.Key_Down)
    QTest.keyClick(combo, Qt.Key.Key_Down)
    assert page.mode is CallMode.PUSH_TO_TALK


def _space(page) -> None:
    target = QApplication.focusWidget() or page.window()
    QTest.keyPress(target, Qt.Key.Key_Space)
    QTest.keyRelease(target, Qt.Key.Key_Space)


def test_space_talks_right_after_push_to_talk_is_chosen_in_a_call(make_page, aloop, qtbot, screenshot):
    owner = Owner()
    page = make_page(owner)
    call = started(aloop, page, owner)
    _choose_with_keys(page, qtbot)
    assert not page.controls.mode.hasFocus()
    assert page.hasFocus()
    _space(page)
    assert call.names()[-2:] == ["key_down", "key_up"]
    assert not page.controls.mode.view().isVisible()
    screenshot(page, "call_ptt_chosen")


def test_space_after_choosing_push_to_talk_before_a_call_does_not_reopen_the_dropdown(make_page, aloop, qtbot):
    owner = Owner()
    page = make_page(owner)
    _choose_with_keys(page, qtbot)
    _space(page)
    assert not page.controls.mode.view().isVisible()
    assert page.mode is CallMode.PUSH_TO_TALK
    call = started(aloop, page, owner)  # and then, in the call, Space talks
    _space(page)
    assert call.names()[-2:] == ["key_down", "key_up"]
