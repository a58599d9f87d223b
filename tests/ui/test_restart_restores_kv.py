"""Issue 22, the real restart test: the app's composition started (the embedded default model in
its worker process), a conversation run, the app closed, started again: the next turn restores
the history's KV from disk. And the same after Settings → Cache → "Clear": the snapshots are
gone, and the next turn prefills the history again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from desktop.chat.conversations import StoredMessage
from desktop.composition import Composition
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Done
from desktop.settings import Settings
from desktop.workers.kv_disk.files import SnapshotDir, kv_root

pytestmark = [pytest.mark.real_model, pytest.mark.slow]
STORY = " ".join(f"Note {i}: the lighthouse keeper counted {i * 7} gulls and wrote it down." for i in range(30))


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """Throwaway settings, conversations, log and snapshots; the converted default model shared."""
    shared = Path(os.environ["OMNIDESK_CACHE_DIR"]) / "models"
    for name in ("CONFIG", "DATA", "LOG", "CACHE"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    (tmp_path / "cache").mkdir()
    if shared.exists():
        (tmp_path / "cache" / "models").symlink_to(shared.resolve(), target_is_directory=True)
    return tmp_path


async def _turn(comp: Composition, conv_id: str, messages: list[Message]) -> Done:
    end = None
    async for event in comp.gateway.chat(messages, SamplingParams(max_tokens=8, temperature=0.0),
                                         conversation=conv_id):
        end = event
    assert isinstance(end, Done), end
    return end


def _started(qapp, aloop, dirs: Path) -> Composition:
    comp = Composition(qapp, Settings(), settings_path=dirs / "settings.json")
    comp.start()
    assert aloop.run(comp.wait_ready(300), 320), "the default model did not load"
    return comp


def _clear_in_settings(comp: Composition, qtbot) -> None:
    """Settings → Cache → Clear…, answered Clear; waits for the figure to say nothing is left."""
    comp.open_settings("Cache")
    usage = comp.settings_dialog.tabs.currentWidget().disk_usage
    qtbot.waitUntil(usage.clear.isEnabled, timeout=10_000)
    usage.clear.click()
    box = usage.confirm
    next(b for b in box.buttons() if box.buttonRole(b) == QMessageBox.ButtonRole.DestructiveRole).click()
    qtbot.waitUntil(lambda: usage.label.text() == "Nothing saved yet", timeout=10_000)
    comp.settings_dialog.reject()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("clear", [False, True], ids=["restored", "cleared"])
def test_the_next_turn_after_a_restart_comes_from_disk_unless_cleared(qapp, aloop, qtbot, dirs, clear):
    comp = _started(qapp, aloop, dirs)
    conv = comp.store.new("You are a careful assistant.")
    conv.messages.append(StoredMessage(role="user", content=f"{STORY}\nHow many gulls in note 3?"))
    comp.store.save(conv)
    history = [Message("system", conv.system_prompt), Message("user", conv.messages[0].content)]
    try:
        first = aloop.run(_turn(comp, conv.id, history), 300)
    finally:
        aloop.run(comp.shutdown(), 120)  # as Ctrl+Q: the worker's Shutdown writes its KV to disk
    assert first.stats.input_tokens > 300
    snapshots = SnapshotDir(kv_root()).entries()
    assert [e.conversation for e in snapshots] == [conv.id], "no snapshot of the conversation was written"

    comp = _started(qapp, aloop, dirs)  # the next start: the store, the snapshots and a new worker
    try:
        assert conv.id in comp.store
        if clear:
            _clear_in_settings(comp, qtbot)
            assert SnapshotDir(kv_root()).entries() == []
        follow = history + [Message("assistant", first.text), Message("user", "And in note 4?")]
        second = aloop.run(_turn(comp, conv.id, follow), 300)
    finally:
        aloop.run(comp.shutdown(), 120)
    if clear:
        assert second.stats.kind != "disk" and second.stats.cached_tokens < first.stats.input_tokens // 2
    else:
        assert second.stats.kind == "disk", second.stats
        assert second.stats.cached_tokens >= first.stats.input_tokens  # the whole history, not re-read
