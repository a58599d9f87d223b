"""Issue 22 §0: "Conversations kept in memory" is automatic (from the KV budget) by default; a
settings file written before that, holding the old default of 4, loads as automatic, while a
number the user chose is kept."""

from __future__ import annotations

import json

from desktop.settings import OLD_DEFAULT_SLOTS, VERSION, Settings, load_settings, save_settings


def write(tmp_path, **values):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(values))
    return path


def test_automatic_is_the_default_and_reaches_the_worker_as_zero():
    s = Settings()
    assert s.slots_per_worker == 0 and s.worker_config().num_slots == 0
    assert Settings(slots_per_worker=12).worker_config().num_slots == 12


def test_an_old_file_with_the_old_default_loads_as_automatic(tmp_path):
    settings, warning = load_settings(write(tmp_path, slots_per_worker=OLD_DEFAULT_SLOTS, temperature=0.3))
    assert warning is None and settings.slots_per_worker == 0 and settings.temperature == 0.3
    assert settings.settings_version == VERSION


def test_an_old_file_with_a_chosen_number_keeps_it(tmp_path):
    settings, warning = load_settings(write(tmp_path, slots_per_worker=7))
    assert warning is None and settings.slots_per_worker == 7


def test_four_chosen_in_this_version_stays_four(tmp_path):
    path = tmp_path / "settings.json"
    save_settings(Settings(slots_per_worker=OLD_DEFAULT_SLOTS), path)
    assert json.loads(path.read_text())["settings_version"] == VERSION
    assert load_settings(path)[0].slots_per_worker == OLD_DEFAULT_SLOTS


def test_a_bad_count_falls_back_to_automatic_alone(tmp_path):
    settings, warning = load_settings(write(tmp_path, slots_per_worker=10_000, workers=2, settings_version=VERSION))
    assert settings.slots_per_worker == 0 and settings.workers == 2
    assert warning is not None and "slots_per_worker" in warning
