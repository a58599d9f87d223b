"""The model manager's settings: downloads are off by default (the app stays offline), the idle
unload is off by default and bounded, the models folder and the Models page are remembered."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from desktop.settings import Settings, load_settings, save_settings


def test_defaults_keep_the_app_offline_and_the_model_loaded():
    s = Settings()
    assert s.hub_downloads is False and s.idle_unload_minutes == 0 and s.models_folder == ""


def test_the_model_manager_settings_round_trip(tmp_path):
    path = tmp_path / "settings.json"
    save_settings(Settings(hub_downloads=True, idle_unload_minutes=15, models_folder="/m", last_page="models"), path)
    loaded, warning = load_settings(path)
    assert warning is None
    assert (loaded.hub_downloads, loaded.idle_unload_minutes, loaded.models_folder, loaded.last_page) == \
        (True, 15, "/m", "models")


def test_a_bad_idle_value_falls_back_alone(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"idle_unload_minutes": -3, "hub_downloads": True}))
    loaded, warning = load_settings(path)
    assert loaded.idle_unload_minutes == 0 and loaded.hub_downloads is True and "idle_unload_minutes" in warning
    with pytest.raises(ValidationError):
        Settings(idle_unload_minutes=24 * 60 + 1)
