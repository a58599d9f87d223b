"""The Recordings page (offscreen) on recordings written by the spec: list, sort, search, delete
with confirmation (confirmed and cancelled), export as zip, the empty state, the main window; a
recording going on now told from one cut short, and the list following it to its end."""

from __future__ import annotations

import zipfile

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from recording_samples import sample_call, sample_chat
from desktop.settings import Settings
from desktop.ui.main_window import MainWindow
from desktop.ui.recordings import RecordingsPage
from desktop.ui.recordings.list_model import DURATION, SUMMARY_ROLE, TITLE


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "recordings"
    sample_call(root, started_at=1_764_000_000.0, title="Standup notes", first_words="good morning team")
    sample_chat(root, started_at=1_764_100_000.0)
    crashed = sample_call(root, started_at=1_764_200_000.0, title="", first_words="can you hear me", finish=False)
    crashed.crash()
    return root


def make_page(qtbot, root):
    page = RecordingsPage(lambda: root)
    qtbot.addWidget(page)
    page.resize(1000, 600)
    page.show()
    qtbot.waitUntil(lambda: page.list.model.rowCount() == len(list(root.iterdir())) and page.list.background.busy == 0)
    return page


def rows(page) -> list[str]:
    proxy = page.list.proxy
    return [proxy.data(proxy.index(r, TITLE)) for r in range(proxy.rowCount())]


def test_list_sort_and_search(qtbot, root, screenshot):
    page = make_page(qtbot, root)
    lst = page.list
    assert lst.stack.currentIndex() == 0
    titles = rows(page)
    assert titles[1:] == ["Trip planning", "Standup notes"]  # newest first
    assert titles[0].startswith("Video call on 2025-")  # no title: the type and date stand in
    proxy = lst.proxy
    assert [proxy.data(proxy.index(r, 1)) for r in range(3)] == ["Video call", "Chat", "Video call"]
    assert proxy.data(proxy.index(0, DURATION)) == "0:05 ⚠" and proxy.data(proxy.index(1, DURATION)) == "0:40"
    assert lst.selected() is not None and lst.open_button.isEnabled()
    screenshot(page, "recordings_list")

    lst.table.sortByColumn(DURATION, Qt.SortOrder.AscendingOrder)  # by seconds, not by text
    assert [proxy.data(proxy.index(r, 0), SUMMARY_ROLE).duration for r in range(3)] == [5.5, 6.0, 40.0]
    lst.table.sortByColumn(TITLE, Qt.SortOrder.AscendingOrder)
    assert rows(page)[:2] == ["Standup notes", "Trip planning"] and rows(page)[2].startswith("Video call")

    lst.search.setText("LISBON")  # first words, any case
    assert rows(page) == ["Trip planning"] and not lst.no_match.isVisible()
    lst.search.setText("standup morning")  # every word, title or first words
    assert rows(page) == ["Standup notes"]
    lst.search.setText("nothing like this")
    assert rows(page) == [] and lst.no_match.isVisibleTo(page) and "nothing like this" in lst.no_match.text()
    assert not lst.delete_button.isEnabled()
    lst.search.clear()
    assert len(rows(page)) == 3


def answer(box: QMessageBox, role: QMessageBox.ButtonRole) -> None:
    button = next(b for b in box.buttons() if box.buttonRole(b) == role)
    button.click()


def test_delete_asks_first(qtbot, root):
    page = make_page(qtbot, root)
    lst = page.list
    assert lst.select(next(p for p in root.iterdir() if "-chat-" in p.name))
    target = lst.selected().folder
    box = lst.delete_selected()
    assert box is not None and box.isVisible() and "Trip planning" in box.text()
    assert box.windowModality() != Qt.WindowModality.NonModal  # open(), not exec()
    answer(box, QMessageBox.ButtonRole.RejectRole)
    qtbot.waitUntil(lambda: lst.dialog is None)
    assert target.exists() and len(rows(page)) == 3
    box = lst.delete_selected()
    answer(box, QMessageBox.ButtonRole.DestructiveRole)
    qtbot.waitUntil(lambda: len(rows(page)) == 2 and lst.background.busy == 0)
    assert not target.exists() and "Trip planning" not in rows(page)


def test_export_zip(qtbot, root, tmp_path):
    page = make_page(qtbot, root)
    lst = page.list
    assert lst.select(next(p for p in root.iterdir() if "-call-" in p.name and (p / "meta.json").read_text().find("Standup") > 0))
    folder = lst.selected().folder
    messages: list[str] = []
    page.status.connect(messages.append)
    lst.export_selected()  # without a path: asks where, without blocking
    assert isinstance(lst.dialog, QFileDialog) and lst.dialog.isVisible()
    assert lst.dialog.selectedFiles()[0].endswith("Standup notes.zip")
    lst.dialog.reject()
    dest = tmp_path / "standup.zip"
    lst.export_selected(dest)
    qtbot.waitUntil(lambda: lst.background.busy == 0)
    with zipfile.ZipFile(dest) as z:
        names = set(z.namelist())
    assert f"{folder.name}/meta.json" in names and f"{folder.name}/ai_audio/000002.wav" in names
    assert len([n for n in names if n.endswith(".jpg")]) == 6
    assert messages[-1] == f"Exported to {dest}"
    lst.export_selected(tmp_path / "missing" / "x.zip")
    qtbot.waitUntil(lambda: lst.background.busy == 0)
    assert messages[-1].startswith("Could not export the recording")


def test_a_live_recording_is_not_listed_as_cut_short(qtbot, root, screenshot):
    """A chat being recorded now (a real recorder, as the app's Recordings service sees it) reads
    "● Recording" with what it has so far; an unfinished folder nobody writes (a crashed run's)
    keeps its ⚠; when the recording ends, the shown list updates by itself."""
    from desktop.media.clock import VirtualClock
    from desktop.recording.service import Recordings
    from desktop.recording.writer import SessionRecorder

    recordings = Recordings(Settings, root)
    clock = VirtualClock()
    rec = SessionRecorder(root, "chat", title="Weekend plans", model="SmolLM2-135M-Instruct", clock=clock)
    clock.advance(12.0)
    rec.event("user_text", text="What should I cook tonight?", turn=1)
    clock.advance(2.0)
    rec.event("assistant_text", text="A risotto.", turn=1)
    qtbot.waitUntil(lambda: "risotto" in (rec.folder / "timeline.jsonl").read_text())
    page = RecordingsPage(lambda: root, live=recordings.live)
    qtbot.addWidget(page)
    page.resize(1000, 400)
    page.show()
    qtbot.waitUntil(lambda: page.list.model.rowCount() == 4 and page.list.background.busy == 0)
    proxy = page.list.proxy

    def row(title: str) -> int:
        return next(r for r in range(proxy.rowCount()) if proxy.data(proxy.index(r, TITLE)) == title)

    live, crashed = row("Weekend plans"), row(rows(page)[1])
    assert rows(page)[1].startswith("Video call on")  # the crashed one, untitled
    assert proxy.data(proxy.index(live, DURATION)) == "● Recording · 0:14"
    assert "Still being recorded: 0:14 so far" in proxy.data(proxy.index(live, DURATION), Qt.ItemDataRole.ToolTipRole)
    assert proxy.data(proxy.index(live, 0), SUMMARY_ROLE).live
    assert proxy.data(proxy.index(crashed, DURATION)) == "0:05 ⚠"
    assert "stopped before this recording ended" in proxy.data(proxy.index(crashed, DURATION), Qt.ItemDataRole.ToolTipRole)
    assert proxy.data(proxy.index(row("Trip planning"), DURATION)) == "0:40"
    messages: list[str] = []
    page.status.connect(messages.append)
    page.list.table.selectRow(live)
    assert not page.list.delete_button.isEnabled() and page.list.export_button.isEnabled()
    assert page.list.delete_selected() is None and "still going on" in messages[-1]  # Del key: refused, said
    assert rec.folder.exists()
    page.list.table.selectRow(row("Trip planning"))  # the live row in its own colour, not the selection's
    screenshot(page, "recordings_list_live")

    rec.close().result(10)  # the chat's session ends (idle, or the app closes)
    qtbot.waitUntil(lambda: not proxy.data(proxy.index(row("Weekend plans"), 0), SUMMARY_ROLE).live, timeout=5000)
    ended = row("Weekend plans")
    assert proxy.data(proxy.index(ended, DURATION)) == "0:14"
    assert proxy.data(proxy.index(ended, DURATION), Qt.ItemDataRole.ToolTipRole) is None
    assert proxy.data(proxy.index(row(rows(page)[1]), DURATION)) == "0:05 ⚠"
    page.list.table.selectRow(ended)
    assert page.list.delete_button.isEnabled()
    recordings.close()


def test_a_live_calls_time_ticks_on_and_a_live_chats_stays_its_messages_span(qtbot, tmp_path):
    """A call records without pause: its row counts from its start, repainted each tick. A chat's
    time is its messages' span, which does not grow while nobody writes."""
    from desktop.recording.library import Summary
    from desktop.ui.recordings.list_model import RecordingsModel

    now = [1000.0]
    model = RecordingsModel(clock=lambda: now[0])
    call = Summary(tmp_path / "c", "call", "", "", started_at=1000.0, duration=0.0, size=0, complete=False,
                   video=False, live=True)
    chat = Summary(tmp_path / "h", "chat", "", "", started_at=900.0, duration=14.0, size=0, complete=False,
                   video=False, live=True)
    model.set_rows([call, chat])
    changed: list[int] = []
    model.dataChanged.connect(lambda top, bottom, roles: changed.extend(range(top.row(), bottom.row() + 1)))
    assert model.data(model.index(0, DURATION)) == "● Recording · 0:00"
    now[0] = 1075.0
    model.tick()
    assert changed == [0]  # the call's cell only
    assert model.data(model.index(0, DURATION)) == "● Recording · 1:15"
    assert "1:15 so far" in model.data(model.index(0, DURATION), Qt.ItemDataRole.ToolTipRole)
    assert model.data(model.index(1, DURATION)) == "● Recording · 0:14"


def test_empty_state(qtbot, tmp_path, screenshot):
    page = RecordingsPage(lambda: tmp_path / "none-yet")
    qtbot.addWidget(page)
    page.resize(1000, 600)
    asked: list[str] = []
    page.settings_page_requested.connect(asked.append)
    page.show()
    qtbot.waitUntil(lambda: page.list.stack.currentIndex() == 1)
    assert page.list.empty.isVisible() and "every call is kept" in page.list.empty.body.text()
    screenshot(page, "recordings_empty")
    page.list.empty.button.click()
    assert asked == ["Recording"]
    sample_chat(tmp_path / "none-yet")
    page.list.refresh()  # F5; the page also rescans whenever it is shown
    qtbot.waitUntil(lambda: page.list.stack.currentIndex() == 0)
    assert rows(page) == ["Trip planning"]


def test_main_window_takes_the_recordings_page(qtbot, root):
    page = RecordingsPage(lambda: root)
    window = MainWindow(Settings(), lambda: None, recordings_page=page)
    qtbot.addWidget(window)
    window.show_page("recordings")
    assert window.pages["recordings"] is page and window.stack.currentWidget() is page
    page.status.emit("Deleted it")
    assert window.status.toolTip() == "Deleted it"


@pytest.fixture
def make_comp(tmp_path, monkeypatch, qapp, aloop):
    from desktop.composition import Composition

    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    made: list[Composition] = []

    def make() -> Composition:
        comp = Composition(qapp, Settings(model_source="tiny"), settings_path=tmp_path / "settings.json")
        comp.start()
        made.append(comp)
        aloop.run(comp.wait_ready(60))  # before any qtbot wait
        return comp

    yield make
    for comp in made:
        aloop.run(comp.shutdown(), 30)


def test_recording_settings_opens_the_recording_page_of_settings(make_comp, qtbot, screenshot):
    """The empty page's "Recording settings…" opens Settings on its Recording page (also when the
    dialog is open already); Ctrl+, without a page opens it where the user last left it."""
    comp = make_comp()
    window, page = comp.window, comp.recordings_page
    window.show_page("recordings")
    qtbot.waitUntil(lambda: page.list.stack.currentIndex() == 1)  # no recordings yet
    qtbot.mouseClick(page.list.empty.button, Qt.MouseButton.LeftButton)
    dialog = comp.settings_dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog.current_page() == "Recording" and dialog.tabs.tabText(dialog.tabs.currentIndex()) == "Recording"
    screenshot(dialog, "settings_from_recordings")
    dialog.tabs.setCurrentIndex(dialog.tabs.indexOf(dialog.model_page))
    qtbot.mouseClick(page.list.empty.button, Qt.MouseButton.LeftButton)  # open already: it turns to the page
    assert comp.settings_dialog is dialog and dialog.current_page() == "Recording"
    dialog.show_page("Sampling")
    dialog.reject()
    assert comp.settings_dialog is None
    window.settings_requested.emit()  # Ctrl+,
    assert comp.settings_dialog is not None and comp.settings_dialog.current_page() == "Sampling"
    comp.settings_dialog.reject()


def test_enter_opens_the_selected_recording_and_esc_comes_back(qtbot, root):
    from PySide6.QtTest import QTest

    page = make_page(qtbot, root)
    lst = page.list
    assert lst.select(next(p for p in root.iterdir() if "-chat-" in p.name))
    QTest.keyClick(lst.table, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: page.currentWidget() is page.viewer)
    assert page.viewer.title.text() == "Trip planning"
    page.viewer.close_recording()
    assert page.currentWidget() is page.list and lst.selected().title == "Trip planning"
