"""Headless tests of desktop/settings.py: JSON round trip, defaults merged, unknown keys dropped,
corrupt files kept aside with a warning, atomic save, validation and the reload rule (the faults
of issue 8 — one bad field, nested JSON, backups, two writers — are in test_hardening_settings.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings as hsettings, strategies as st
from pydantic import ValidationError

from desktop.settings import Settings, load_settings, save_settings, settings_path


def test_round_trip(tmp_path):
    path = tmp_path / "settings.json"
    original = Settings(model_source=str(tmp_path), device="cuda:1", dtype="bfloat16", workers=3,
                        cache_mode="spc", temperature=1.3, seed=42, audio_output_device="USB Headset",
                        recording_enabled=True, max_storage_gb=2.5, api_server_enabled=True, api_port=9000)
    save_settings(original, path)
    loaded, warning = load_settings(path)
    assert warning is None
    assert loaded == original


@given(temperature=st.floats(0.0, 5.0), top_p=st.floats(0.01, 1.0), top_k=st.integers(0, 1000),
       seed=st.none() | st.integers(0, 2**63 - 1), port=st.integers(1024, 65535),
       device=st.sampled_from(["auto", "cpu", "cuda", "cuda:0", "cuda:7"]), name=st.none() | st.text(max_size=30))
@hsettings(max_examples=40, deadline=None)
def test_round_trip_any_valid(tmp_path_factory, temperature, top_p, top_k, seed, port, device, name):
    path = tmp_path_factory.mktemp("cfg") / "settings.json"
    original = Settings(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed, api_port=port,
                        device=device, audio_input_device=name)
    save_settings(original, path)
    assert load_settings(path) == (original, None)


def test_missing_file_gives_defaults(tmp_path):
    assert load_settings(tmp_path / "nope.json") == (Settings(), None)


def test_missing_keys_take_defaults_and_unknown_keys_are_ignored(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"temperature": 0.2, "bogus": 1, "old_option": {"x": 1}}), encoding="utf-8")
    loaded, warning = load_settings(path)
    assert warning is None
    assert loaded == Settings(temperature=0.2)
    assert not hasattr(loaded, "bogus")


@pytest.mark.parametrize("content", ["{not json", "[1, 2, 3]", ""], ids=["not-json", "json-list", "empty"])
def test_corrupt_file_gives_defaults_and_is_kept_aside(tmp_path, content):
    path = tmp_path / "settings.json"
    path.write_text(content, encoding="utf-8")
    loaded, warning = load_settings(path)
    assert loaded == Settings()
    assert warning and "defaults" in warning
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("settings.bad-")]
    assert len(aside) == 1, list(tmp_path.iterdir())
    assert str(aside[0]) in warning
    assert aside[0].read_text(encoding="utf-8") == content  # the user's file is never lost
    assert not path.exists()
    # the next save writes a fresh file beside the kept one
    save_settings(loaded, path)
    assert load_settings(path) == (Settings(), None)
    assert aside[0].exists()


def test_save_is_atomic_and_leaves_no_tmp(tmp_path):
    path = tmp_path / "deep" / "er" / "settings.json"
    save_settings(Settings(workers=2), path)
    save_settings(Settings(workers=5), path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]
    assert json.loads(path.read_text(encoding="utf-8"))["workers"] == 5


def test_default_path_follows_config_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIDESK_CONFIG_DIR", str(tmp_path))
    assert settings_path() == tmp_path / "settings.json"
    save_settings(Settings(top_k=7))
    assert load_settings() == (Settings(top_k=7), None)


def test_device_is_normalised_and_checked():
    assert Settings(device=" CUDA:1 ").device == "cuda:1"
    for bad in ("gpu7", "cuda:", "cuda:x", "mps", ""):
        with pytest.raises(ValidationError, match="device must be auto, cpu, cuda or cuda:N"):
            Settings(device=bad)


@pytest.mark.parametrize("field,value", [("api_port", 80), ("workers", 0), ("top_p", 0.0),
                                         ("temperature", 5.5), ("model_source", "  "), ("cache_mode", "all")])
def test_out_of_bounds_values_are_refused(field, value):
    with pytest.raises(ValidationError):
        Settings.model_validate({field: value})


def test_assignment_is_validated():
    s = Settings()
    with pytest.raises(ValidationError):
        s.api_port = 22


def test_needs_reload():
    base = Settings()
    for change in ({"device": "cuda"}, {"workers": 2}, {"cache_mode": "off"}, {"kv_budget_mb": 64},
                   {"model_source": "/models/x.gguf"}, {"dtype": "float16"}):
        assert base.needs_reload(base.model_copy(update=change)), change
    for change in ({"temperature": 1.0}, {"api_port": 9000}, {"recording_enabled": False}, {"record_chats": True}, {"theme": "dark"},
                   {"remote_workers": [{"url": "http://gpu:8080"}]}):  # joins the running pool instead
        assert not base.needs_reload(base.model_copy(update=change)), change


def test_derived_configs():
    s = Settings(slots_per_worker=8, cache_mode="imc", kv_budget_mb=64, temperature=0.0, seed=3)
    assert s.worker_config().num_slots == 8
    assert s.worker_config().kv_budget_bytes == 64 << 20
    assert s.sampling().greedy and s.sampling().seed == 3
    assert s.model_spec().device == "cpu"
