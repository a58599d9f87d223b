"""The first-run page (issue 23 §1): what was found, what was chosen and why; "Change…" asks for
Settings, "Continue" closes it. Screenshots of three machines go to /work/notes/shots/."""

from __future__ import annotations

import os
from pathlib import Path

from desktop.model.hardware import GIB, Gpu, Machine
from desktop.settings import Settings
from desktop.ui.first_run import FirstRunPage, chosen, found
from desktop.workers.readiness import decide

SHOTS = Path(os.environ.get("OMNIDESK_SHOTS", "/work/notes/shots"))
LAPTOP = Machine(2, 4, 8 * GIB, int(5.5 * GIB), 120 * GIB, frozenset({"avx2"}))
H100 = Machine(16, 32, 128 * GIB, 110 * GIB, 900 * GIB, frozenset({"avx2", "avx512f", "amx_bf16", "avx512_bf16"}),
               (Gpu(0, "NVIDIA H100 80GB HBM3", 80 * GIB, (9, 0)),))
TINY = Machine(1, 1, 2 * GIB, int(1.1 * GIB), 3 * GIB, frozenset(), (), "Linux", "the GPU driver did not answer within 60 s")


def shot(widget, name: str) -> None:
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
        widget.grab().save(str(SHOTS / f"ready-{name}.png"))
    except OSError:
        pass


def texts(page) -> str:
    from PySide6.QtWidgets import QLabel

    return "\n".join(label.text() for label in page.findChildren(QLabel))


def test_the_page_shows_facts_choices_and_reasons(qtbot):
    for name, machine in (("laptop", LAPTOP), ("h100", H100), ("tiny", TINY)):
        choices = decide(machine)
        page = FirstRunPage(machine, choices, changed=name == "h100")
        qtbot.addWidget(page)
        page.show()
        qtbot.waitExposed(page)
        shown = texts(page)
        for what, value in found(machine):
            assert value in shown, what
        for what, value, why in chosen(choices):
            assert value in shown and why in shown, what
        shot(page, name)
    assert "H100" in found(H100)[0][1] and "does not fit" in texts(page)
    assert "did not answer" in texts(page)


def test_change_asks_for_settings_and_continue_closes(qtbot):
    page = FirstRunPage(LAPTOP, decide(LAPTOP))
    qtbot.addWidget(page)
    page.show()
    with qtbot.waitSignal(page.change_requested, timeout=1000):
        page.change.click()
    assert not page.isVisible()
    again = FirstRunPage(LAPTOP, decide(LAPTOP))
    qtbot.addWidget(again)
    again.show()
    with qtbot.waitSignal(again.accepted, timeout=1000):
        again.cont.click()


def test_settings_offer_automatic_device_and_cache_budget(qtbot):
    from desktop.ui.settings_dialog import SettingsDialog

    dlg = SettingsDialog(Settings(), sound_devices=[])
    qtbot.addWidget(dlg)
    dlg.open()
    qtbot.waitExposed(dlg)
    model, cache = dlg.pages[:2]
    assert model.device.currentText() == "Automatic" and model.values()["device"] == "auto"
    shot(dlg, "settings-model")
    assert cache.budget.text().startswith("Automatic") and cache.values()["kv_budget_mb"] == 0
    dlg.show_page("Cache")
    shot(dlg, "settings-cache")
    model.device.setCurrentText("cuda:1")
    assert model.values()["device"] == "cuda:1"
    chosen_cpu = SettingsDialog(Settings(device="cpu", kv_budget_mb=512), sound_devices=[])
    qtbot.addWidget(chosen_cpu)
    assert chosen_cpu.pages[0].values()["device"] == "cpu" and chosen_cpu.pages[1].values()["kv_budget_mb"] == 512
