"""Issue 19, polish item 9 (settings): the call and camera settings (`call_mode`,
`call_idle_timeout_s`, `camera_device`, `camera_preview_fps`, `camera_frames_per_s`,
`camera_max_frames`) have a place in the Settings dialog: a Calls page that shows them, takes
changes, refuses bad values in plain words and gives back an unchanged value exactly."""

from __future__ import annotations

import pytest

from desktop.settings import Settings
from desktop.ui.settings_call import CallsPage
from desktop.ui.settings_dialog import SettingsDialog

pytestmark = pytest.mark.hardening
FIELDS = ("call_mode", "call_idle_timeout_s", "camera_device", "camera_preview_fps", "camera_frames_per_s",
          "camera_max_frames")


@pytest.fixture
def make(qtbot):
    def make(settings: Settings) -> tuple[SettingsDialog, CallsPage]:
        dlg = SettingsDialog(settings, sound_devices=["USB Headset"], page="Calls")
        qtbot.addWidget(dlg)
        dlg.open()
        qtbot.waitExposed(dlg)
        page = dlg.tabs.currentWidget()
        assert isinstance(page, CallsPage) and dlg.current_page() == "Calls"
        return dlg, page

    return make


def test_every_call_and_camera_setting_has_a_field(make, screenshot):
    s = Settings(call_mode="push_to_talk", call_idle_timeout_s=437.0, camera_device="/dev/video2",
                 camera_preview_fps=24, camera_frames_per_s=2.0, camera_max_frames=40)
    dlg, page = make(s)
    assert set(FIELDS) <= set(page.fields)
    assert {k: page.values()[k] for k in FIELDS} == {k: getattr(s, k) for k in FIELDS}  # exact round trip
    assert page.idle.text().startswith("7.3") and page.camera.currentText() == "/dev/video2"
    assert not dlg.apply_button.isEnabled()
    screenshot(dlg, "settings_calls")
    applied = []
    dlg.applied.connect(applied.append)
    page.mode.setCurrentIndex(page.mode.findData("turns"))
    page.idle.setValue(10.0)
    page.camera.setEditText("1")
    page.preview.setValue(10)
    page.rate.setValue(0.5)
    page.max_frames.setValue(8)
    assert dlg.apply_button.isEnabled() and dlg.apply()
    new = applied[-1]
    assert (new.call_mode, new.call_idle_timeout_s, new.camera_device, new.camera_preview_fps,
            new.camera_frames_per_s, new.camera_max_frames) == ("turns", 600.0, "1", 10, 0.5, 8)
    page.camera.setCurrentIndex(0)
    assert dlg.apply() and applied[-1].camera_device is None  # "First camera found"


def test_the_page_sits_beside_audio_and_the_tabs_fit(make, screenshot):
    dlg, page = make(Settings())
    titles = [p.title for p in dlg.pages]
    assert titles.index("Calls") == titles.index("Audio") + 1
    bar = dlg.tabs.tabBar()
    assert bar.tabRect(bar.count() - 1).right() <= dlg.tabs.width()  # no tab scrolled out of sight
