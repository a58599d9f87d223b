"""Settings dialog tests (offscreen): current values shown, OK/Apply emit validated Settings, bad
values refused inline with the dialog kept open, keyboard, file picker, layout and screenshots."""

from __future__ import annotations

import asyncio
import re

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QAbstractButton, QDialog, QLabel, QWidget

from desktop.settings import Settings
from desktop.ui.settings_dialog import RELOAD_NOTE, SettingsDialog

DEVICES = ["Built-in Audio Analog Stereo", "USB Headset"]
PAGE_NAMES = ["model", "cache", "sampling", "audio", "recording", "api", "remote"]


@pytest.fixture
def make(qtbot):
    def make(settings: Settings | None = None, devices: list[str] | None = DEVICES) -> SettingsDialog:
        dlg = SettingsDialog(settings or Settings(), sound_devices=devices)
        qtbot.addWidget(dlg)
        dlg.open()
        qtbot.waitExposed(dlg)
        return dlg

    return make


def press_ok(qtbot, dlg: SettingsDialog) -> None:
    qtbot.mouseClick(dlg.ok_button, Qt.MouseButton.LeftButton)


def test_opens_on_the_page_asked_for(qtbot):
    dlg = SettingsDialog(Settings(), sound_devices=DEVICES, page="Recording")
    qtbot.addWidget(dlg)
    assert dlg.current_page() == "Recording" and dlg.tabs.currentWidget().title == "Recording"
    assert dlg.show_page(dlg.pages[5].title)
    assert dlg.tabs.currentIndex() == 5
    assert not dlg.show_page("No such page") and dlg.tabs.currentIndex() == 5
    plain = SettingsDialog(Settings(), sound_devices=DEVICES)
    qtbot.addWidget(plain)
    assert plain.current_page() == "Model"


def test_shows_current_values(make, tmp_path):
    s = Settings(model_source=str(tmp_path), device="cuda:1", dtype="bfloat16", workers=3, slots_per_worker=6,
                 cache_mode="spc", cache_min_tokens=250, kv_budget_mb=512, temperature=1.25, top_p=0.5,
                 top_k=40, repetition_penalty=1.2, max_tokens=100, seed=7, audio_output_device="USB Headset",
                 recording_enabled=True, retention_days=9, max_storage_gb=1.5, api_server_enabled=True,
                 api_port=9001, remote_workers=[{"url": "http://gpu.lan:8080", "model": "m", "api_key": "k"}])
    dlg = make(s)
    model, cache, sampling, audio, _calls, recording, api, remote, _tools = dlg.pages
    assert model.local.isChecked() and model.path.text() == str(tmp_path)
    assert (model.device.currentText(), model.dtype.currentText()) == ("cuda:1", "bfloat16")
    assert (model.workers.value(), model.slots.value()) == (3, 6)
    assert cache.mode.checkedButton().property("mode") == "spc"
    assert (cache.min_tokens.value(), cache.budget.value()) == (250, 512)
    assert (sampling.temperature.value(), sampling.top_p.value(), sampling.top_k.value()) == (1.25, 0.5, 40)
    assert (sampling.penalty.value(), sampling.max_tokens.value(), sampling.seed.text()) == (1.2, 100, "7")
    assert (audio.output.currentText(), audio.input.currentText()) == ("USB Headset", "System default")
    assert recording.enabled.isChecked() and recording.days.value() == 9 and recording.gb.value() == 1.5
    assert api.enabled.isChecked() and api.port.value() == 9001 and api.address.text().endswith(":9001")
    assert [remote.table.item(0, c).text() for c in range(3)] == ["http://gpu.lan:8080", "m", "set"]
    assert not dlg.apply_button.isEnabled()  # nothing changed yet
    assert dlg.form_values() == s.model_dump()  # the form round-trips the settings exactly


def test_ok_emits_the_changed_settings(make, qtbot):
    dlg = make(Settings(theme="dark", window_geometry="AAAA", last_conversation_id="c1"))
    dlg.pages[2].temperature.setValue(1.5)
    dlg.pages[1].mode.buttons()[3].setChecked(True)  # "off"
    dlg.pages[3].output.setCurrentIndex(2)
    with qtbot.waitSignal(dlg.applied) as sig:
        press_ok(qtbot, dlg)
    new = sig.args[0]
    assert isinstance(new, Settings)
    assert (new.temperature, new.cache_mode, new.audio_output_device) == (1.5, "off", "USB Headset")
    assert (new.theme, new.window_geometry, new.last_conversation_id) == ("dark", "AAAA", "c1")  # kept
    assert dlg.result() == QDialog.DialogCode.Accepted and not dlg.isVisible()
    assert dlg.result_settings() == new


def test_ok_without_changes_accepts_without_emitting(make, qtbot):
    s = Settings(top_k=3)
    dlg = make(s)
    with qtbot.assertNotEmitted(dlg.applied):
        press_ok(qtbot, dlg)
    assert dlg.result() == QDialog.DialogCode.Accepted and dlg.result_settings() == s


def test_cancel_and_escape_emit_nothing(make, qtbot):
    for close in ("button", "escape"):
        dlg = make()
        dlg.pages[2].temperature.setValue(2.0)
        with qtbot.assertNotEmitted(dlg.applied):
            if close == "button":
                qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Cancel), Qt.MouseButton.LeftButton)
            else:
                qtbot.keyClick(dlg.pages[2].temperature, Qt.Key.Key_Escape)
        assert dlg.result() == QDialog.DialogCode.Rejected and dlg.result_settings() is None


@pytest.mark.parametrize("where", ["spin", "device", "seed"])
def test_enter_is_ok_from_any_field(make, qtbot, where):
    dlg = make()
    model, sampling = dlg.pages[0], dlg.pages[2]
    dlg.tabs.setCurrentWidget(model if where == "device" else sampling)
    target, text = {"spin": (sampling.max_tokens, "300"), "device": (model.device.lineEdit(), "cuda:2"),
                    "seed": (sampling.seed, "99")}[where]
    target.setFocus()
    target.selectAll() if hasattr(target, "selectAll") else None
    qtbot.keyClicks(target, text)
    with qtbot.waitSignal(dlg.applied) as sig:
        qtbot.keyClick(target, Qt.Key.Key_Return)
    new = sig.args[0]
    got = {"spin": new.max_tokens, "device": new.device, "seed": new.seed}[where]
    assert got == {"spin": 300, "device": "cuda:2", "seed": 99}[where]
    assert dlg.result() == QDialog.DialogCode.Accepted


def test_invalid_device_is_refused_inline(make, qtbot, screenshot):
    dlg = make()
    model = dlg.pages[0]
    dlg.tabs.setCurrentIndex(4)
    model.device.lineEdit().selectAll()
    qtbot.keyClicks(model.device.lineEdit(), "gpu7")
    with qtbot.assertNotEmitted(dlg.applied):
        press_ok(qtbot, dlg)
    assert dlg.isVisible() and dlg.result_settings() is None
    assert dlg.error.isVisible()
    assert dlg.error.text().startswith("Device:") and "gpu7" in dlg.error.text() and "cuda:N" in dlg.error.text()
    assert dlg.tabs.currentWidget() is model  # taken to the field
    assert dlg.focusWidget() is model.device and model.device.lineEdit().selectedText() == "gpu7"
    screenshot(dlg, "settings-error")
    qtbot.keyClicks(model.device.lineEdit(), "cuda:0")  # typing over the selection fixes it
    assert not dlg.error.isVisible()
    with qtbot.waitSignal(dlg.applied) as sig:
        press_ok(qtbot, dlg)
    assert sig.args[0].device == "cuda:0"


@pytest.mark.parametrize("case", ["missing", "not-gguf", "empty", "not-model"])
def test_bad_model_path_is_refused(make, qtbot, tmp_path, case):
    dlg = make()
    model = dlg.pages[0]
    path = {"missing": str(tmp_path / "nowhere"), "not-gguf": str(tmp_path / "notes.txt"), "empty": "",
            "not-model": str(tmp_path)}[case]
    (tmp_path / "notes.txt").write_text("hi")
    model.local.setChecked(True)
    model.path.setText(path)
    dlg.tabs.setCurrentIndex(2)
    with qtbot.assertNotEmitted(dlg.applied):
        press_ok(qtbot, dlg)
    assert dlg.isVisible() and dlg.error.isVisible() and dlg.error.text().startswith("Model:")
    expected = {"missing": "this path does not exist", "not-gguf": "not a .gguf file", "empty": "choose the embedded default",
                "not-model": "it has no config.json"}
    assert expected[case] in dlg.error.text()
    assert dlg.tabs.currentWidget() is model and dlg.focusWidget() is model.path


def test_existing_model_folder_and_default_are_accepted(make, qtbot, tmp_path):
    dlg = make()
    model = dlg.pages[0]
    model.local.setChecked(True)
    (tmp_path / "config.json").write_text("{}")
    model.path.setText(str(tmp_path))
    with qtbot.waitSignal(dlg.applied) as sig:
        qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)
    assert sig.args[0].model_source == str(tmp_path) and dlg.isVisible()
    gguf = tmp_path / "other"
    gguf.mkdir()
    (gguf / "m.gguf").write_bytes(b"GGUF")
    model.path.setText(str(gguf))  # a folder with a .gguf file is a model too
    with qtbot.waitSignal(dlg.applied) as sig:
        qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)
    assert sig.args[0].model_source == str(gguf)
    model.builtin.setChecked(True)
    with qtbot.waitSignal(dlg.applied) as sig:
        press_ok(qtbot, dlg)
    assert sig.args[0].model_source == "default"


def test_a_kept_bad_path_does_not_block_other_changes(make, qtbot, tmp_path):
    dlg = make(Settings(model_source=str(tmp_path)))  # the folder is no model, but it is what runs now
    dlg.pages[0].workers.setValue(2)
    with qtbot.waitSignal(dlg.applied) as sig:
        press_ok(qtbot, dlg)
    assert sig.args[0].workers == 2


def test_typing_a_path_selects_local_model(make, qtbot, tmp_path):
    dlg = make()
    model = dlg.pages[0]
    assert model.builtin.isChecked()
    qtbot.keyClicks(model.path, str(tmp_path))
    assert model.local.isChecked() and dlg.form_values()["model_source"] == str(tmp_path)


@pytest.mark.parametrize("folder", [True, False])
def test_file_picker_is_non_modal_and_fills_the_path(make, qtbot, tmp_path, folder):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    dlg = make()
    model = dlg.pages[0]
    button = next(b for b in model.findChildren(QAbstractButton) if b.text() == ("&Folder…" if folder else "&GGUF file…"))
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)  # returns at once: open(), not exec()
    picker = model.file_dialog
    assert picker is not None and picker.isVisible() and picker.parent() is model
    picker.selectFile(str(tmp_path if folder else gguf))
    picker.accept()
    assert model.file_dialog is None  # closed and let go
    assert model.local.isChecked() and model.path.text() == str(tmp_path if folder else gguf)
    with qtbot.waitSignal(dlg.applied) as sig:
        press_ok(qtbot, dlg)
    assert sig.args[0].model_source == str(tmp_path if folder else gguf)


def test_seed_empty_is_random_and_letters_cannot_be_typed(make, qtbot):
    dlg = make(Settings(seed=5))
    seed = dlg.pages[2].seed
    seed.clear()
    assert dlg.form_values()["seed"] is None
    qtbot.keyClicks(seed, "12ab3")
    assert seed.text() == "123" and dlg.form_values()["seed"] == 123


def test_apply_keeps_the_dialog_open_and_tracks_changes(make, qtbot):
    dlg = make()
    assert not dlg.apply_button.isEnabled()
    dlg.pages[6].port.setValue(9100)
    assert dlg.apply_button.isEnabled()
    with qtbot.waitSignal(dlg.applied) as sig:
        qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)
    assert sig.args[0].api_port == 9100 and dlg.isVisible() and not dlg.apply_button.isEnabled()
    with qtbot.assertNotEmitted(dlg.applied):  # nothing new since Apply
        press_ok(qtbot, dlg)
    assert dlg.result_settings().api_port == 9100


def test_reload_note(make, qtbot):
    dlg = make()
    note, model = dlg.reload_note, dlg.pages[0]
    assert note.text() == RELOAD_NOTE and not note.isVisible()
    dlg.pages[2].temperature.setValue(1.0)
    assert not note.isVisible() and not dlg.needs_reload()
    model.workers.setValue(2)
    assert note.isVisible() and dlg.needs_reload()
    model.workers.setValue(1)
    assert not note.isVisible()
    dlg.pages[1].mode.buttons()[1].setChecked(True)
    assert note.isVisible()
    with qtbot.waitSignal(dlg.applied):
        qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)
    assert not note.isVisible()  # applied: the reload is no longer pending


def test_audio_devices_listed_and_missing_ones_kept(make):
    dlg = make(Settings(audio_input_device="Old Mic"))
    audio = dlg.pages[3]
    items = [audio.input.itemText(i) for i in range(audio.input.count())]
    assert items == ["System default", *DEVICES, "Old Mic (not connected)"]
    assert audio.input.currentData() == "Old Mic" and not audio.none.isVisibleTo(audio)


def test_no_sound_devices_turns_audio_off_but_keeps_choices(make, qtbot, screenshot):
    dlg = make(Settings(audio_output_device="USB Headset"), devices=[])
    audio = dlg.pages[3]
    dlg.tabs.setCurrentWidget(audio)
    assert audio.none.isVisible() and audio.none.text() == "No sound devices found — audio is off."
    assert not audio.output.isEnabled() and not audio.input.isEnabled()
    screenshot(dlg, "settings-audio-none")
    dlg.pages[2].top_k.setValue(10)
    with qtbot.waitSignal(dlg.applied) as sig:
        press_ok(qtbot, dlg)
    assert sig.args[0].audio_output_device == "USB Headset" and sig.args[0].audio_input_device is None


def test_labels_have_buddies_and_unique_mnemonics(make):
    dlg = make()
    for page in dlg.pages:
        letters = []
        for w in page.findChildren(QWidget):
            text = w.text() if isinstance(w, (QLabel, QAbstractButton)) else ""
            m = re.search(r"&(\w)", text or "")
            if not m:
                continue
            letters.append(m.group(1).lower())
            if isinstance(w, QLabel):
                assert w.buddy() is not None, text
        assert len(letters) == len(set(letters)), (page.title, letters)
        for key, widget in page.fields.items():
            assert page.labels[key] and "&" not in page.labels[key], key


def test_tab_order_follows_the_page_top_to_bottom(make):
    dlg = make()
    for page in dlg.pages:
        chain, w = [], page.nextInFocusChain()
        while w is not page and len(chain) < 200:
            if page.isAncestorOf(w) and w.focusPolicy() & Qt.FocusPolicy.TabFocus and w.isVisibleTo(page):
                chain.append(w)
            w = w.nextInFocusChain()
        dlg.tabs.setCurrentWidget(page)
        tops = [w.mapTo(page, w.rect().topLeft()).y() for w in chain]
        assert tops == sorted(tops), page.title


def test_works_with_open_under_qasync(aloop, qtbot):
    """The app's pattern: open() inside a task and await `finished` (exec() would break qasync)."""

    main = QWidget()  # the app's main window stays open (the last window closing would quit the app)
    qtbot.addWidget(main)
    main.show()

    async def scenario() -> tuple[int, list[Settings]]:
        dlg = SettingsDialog(Settings(), main, sound_devices=DEVICES)
        got: list[Settings] = []
        dlg.applied.connect(got.append)
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        dlg.finished.connect(lambda code: done.done() or done.set_result(code))
        dlg.open()
        await asyncio.sleep(0.05)
        dlg.pages[0].workers.setValue(4)
        asyncio.get_running_loop().call_soon(dlg.ok_button.click)
        return await done, got

    code, got = aloop.run(scenario(), timeout=10)
    assert code == QDialog.DialogCode.Accepted.value and [s.workers for s in got] == [4]


def test_each_page_fits_without_scrolling(make, qtbot, screenshot):
    dlg = make()
    for page, name in zip(dlg.pages, PAGE_NAMES):
        dlg.tabs.setCurrentWidget(page)
        qtbot.wait(10)
        layout = page.layout()
        need = layout.heightForWidth(page.width()) if layout.hasHeightForWidth() else layout.minimumSize().height()
        assert need <= page.height(), (name, need, page.height())
        assert layout.minimumSize().width() <= page.width(), name
        area = QRect(0, 0, page.width(), page.height())
        for w in page.findChildren(QWidget):
            if w.isVisibleTo(page) and w.parent() is page:
                box = QRect(w.mapTo(page, w.rect().topLeft()), w.size())
                assert area.contains(box), (name, w, box)
                assert w.height() >= w.minimumSizeHint().height(), (name, w)  # nothing squashed
        screenshot(dlg, f"settings-{name}")
    dlg.pages[0].workers.setValue(2)
    dlg.tabs.setCurrentIndex(0)
    screenshot(dlg, "settings-reload-note")


def test_long_error_wraps_and_the_dialog_grows(make, qtbot, tmp_path, screenshot):
    dlg = make()
    model = dlg.pages[0]
    model.local.setChecked(True)
    notes = tmp_path / ("a-rather-long-file-name-" * 5 + "notes.txt")
    notes.write_text("x")
    model.path.setText(str(notes))
    height = dlg.height()
    press_ok(qtbot, dlg)
    qtbot.wait(10)
    assert dlg.isVisible() and "is not a .gguf file" in dlg.error.text()
    assert dlg.error.height() >= dlg.error.heightForWidth(dlg.error.width())  # the whole message shows
    assert dlg.height() > height
    page = dlg.tabs.currentWidget()
    assert page.layout().heightForWidth(page.width()) <= page.height()  # and the page is not squashed
    screenshot(dlg, "settings-error-long")


def test_spin_box_ranges_come_from_the_pydantic_bounds(make):
    dlg = make()
    model, cache, sampling, _, _calls, recording, api = dlg.pages[:7]
    assert (api.port.minimum(), api.port.maximum()) == (1024, 65535)
    assert (model.workers.minimum(), model.workers.maximum()) == (1, 16)
    assert (cache.budget.minimum(), cache.budget.maximum()) == (0, 1_000_000)  # 0: automatic
    assert cache.budget.specialValueText().startswith("Automatic")
    assert (sampling.top_p.minimum(), sampling.top_p.maximum()) == (0.01, 1.0)  # gt=0: 0 itself is refused
    assert recording.gb.minimum() == 0.1 and recording.days.maximum() == 3650
