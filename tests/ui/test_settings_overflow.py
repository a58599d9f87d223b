"""Issue 22 §2: the overflow policy's choice in Settings → Sampling (forget by default, or stop)."""

from __future__ import annotations

from pathlib import Path

from desktop.settings import Settings
from desktop.ui.settings_pages import SamplingPage


def test_the_overflow_choice_shows_and_returns_the_setting(qtbot):
    page = SamplingPage(Settings())
    qtbot.addWidget(page)
    assert page.overflow.currentText() == "Forget the oldest messages" and page.values()["context_overflow"] == "forget"
    page.overflow.setCurrentIndex(page.overflow.findData("stop"))
    assert page.overflow.currentText() == "Stop and tell me"
    assert Settings(**{**Settings().model_dump(), **page.values()}).context_overflow == "stop"
    stopped = SamplingPage(Settings(context_overflow="stop"))
    qtbot.addWidget(stopped)
    assert stopped.values()["context_overflow"] == "stop"
    page.resize(760, 480)
    page.show()
    qtbot.wait(20)
    Path("/work/notes/shots").mkdir(parents=True, exist_ok=True)
    page.grab().save("/work/notes/shots/slide-settings.png")
