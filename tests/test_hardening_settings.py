"""Issue 8 faults replayed on the settings file: one bad field falls back alone (with a warning that
names it), values a worker would choke on are refused, nested or huge files, backups that collide."""

from __future__ import annotations

import json
import logging
import time

import pytest

from desktop.settings import Settings, load_settings, save_settings

pytestmark = pytest.mark.hardening


def backups(folder):
    return sorted(p for p in folder.iterdir() if p.name.startswith("settings.bad-"))


def test_one_bad_field_falls_back_alone_and_is_named(tmp_path):
    path = tmp_path / "settings.json"
    good = {"temperature": 1.25, "workers": 3, "theme": "dark", "api_port": 9000, "voice_enabled": True}
    path.write_text(json.dumps({**good, "top_k": "lots"}), encoding="utf-8")
    loaded, warning = load_settings(path)
    assert loaded == Settings(**good)  # every other setting is kept
    assert loaded.top_k == Settings().top_k
    assert warning and "top_k = 'lots'" in warning and "defaults" in warning
    assert "temperature" not in warning  # only the bad one is named
    copy = backups(tmp_path)
    assert len(copy) == 1 and str(copy[0]) in warning
    assert json.loads(copy[0].read_text(encoding="utf-8"))["top_k"] == "lots"  # the user's file is kept


@pytest.mark.parametrize("field,value", [
    ("seed", 2**70), ("seed", "abc"), ("seed", -1), ("top_k", 1.5), ("temperature", "0.5"),
    ("temperature", float("nan")), ("max_tokens", True), ("workers", 2.0), ("top_p", None),
    ("repetition_penalty", [1.0]), ("device", {"cuda": 1}), ("model_source", "x\udfff"),
    ("tts_voice", "v" * 100_000), ("model_source", "a\0b"), ("device", [[[[[[[[[[[]]]]]]]]]]] * 3),
    ("theme", json.loads("[" * 500 + "]" * 500)),
])
def test_values_a_worker_would_choke_on_are_replaced_by_defaults(tmp_path, field, value):
    path = tmp_path / "settings.json"
    text = json.dumps({field: value, "slots_per_worker": 7})
    path.write_text(text, encoding="utf-8")
    loaded, warning = load_settings(path)
    assert getattr(loaded, field) == Settings.model_fields[field].default
    assert loaded.slots_per_worker == 7
    assert warning and f"{field} = " in warning
    assert len(warning) < 600  # the bad value is shortened, not pasted whole
    loaded.sampling()  # the worker's parameters build without an error


def test_a_file_full_of_bad_values_gives_a_short_warning(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({name: [name] * 50 for name in Settings.model_fields}), encoding="utf-8")
    loaded, warning = load_settings(path)
    assert loaded == Settings()
    assert "more (see the log)" in warning and len(warning) < 1500


def test_unknown_keys_are_ignored_and_logged(tmp_path, caplog):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"top_k": 7, "from_a_newer_version": {"x": [1, 2]}}), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        loaded, warning = load_settings(path)
    assert loaded == Settings(top_k=7) and warning is None
    assert "from_a_newer_version" in caplog.text


def test_deeply_nested_json_is_set_aside_not_a_crash(tmp_path):
    path = tmp_path / "settings.json"
    bomb = '{"top_k": ' + "[" * 200_000 + "]" * 200_000 + "}"
    path.write_text(bomb, encoding="utf-8")
    loaded, warning = load_settings(path)
    assert loaded == Settings() and warning and "nested too deeply" in warning
    assert [p.read_text(encoding="utf-8") == bomb for p in backups(tmp_path)] == [True]


def test_a_huge_file_is_not_read(tmp_path):
    path = tmp_path / "settings.json"
    with open(path, "wb") as f:
        f.truncate(64 << 20)  # sparse: no disk used (the size matters, not the content)
    start = time.perf_counter()
    loaded, warning = load_settings(path)
    assert time.perf_counter() - start < 1.0
    assert loaded == Settings() and warning and "64 MB" in warning and "1 MB limit" in warning
    aside = backups(tmp_path)
    assert len(aside) == 1 and aside[0].stat().st_size == 64 << 20  # moved, not copied nor deleted


def test_two_corrupt_loads_in_one_second_keep_both_backups(tmp_path):
    path = tmp_path / "settings.json"
    contents = ["{first broken", "{second broken", "[third]"]
    for content in contents:
        path.write_text(content, encoding="utf-8")
        assert load_settings(path)[0] == Settings()
    kept = backups(tmp_path)
    assert sorted(p.read_text(encoding="utf-8") for p in kept) == sorted(contents)


def test_save_then_load_after_a_fallback_has_no_warning(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"seed": "abc", "top_k": 9}), encoding="utf-8")
    loaded, _warning = load_settings(path)
    save_settings(loaded, path)
    assert load_settings(path) == (Settings(top_k=9), None)


@pytest.mark.parametrize("field", ["max_tokens", "temperature", "top_k", "top_p", "repetition_penalty", "seed"])
def test_every_value_settings_accept_is_one_the_worker_accepts(field):
    """The settings' ranges lie inside SamplingParams' (checked at its ends): a value that loads
    can never make the worker refuse or raise later."""
    ends = []
    for m in Settings.model_fields[field].metadata:
        for name in ("ge", "le", "gt"):
            if getattr(m, name, None) is not None:
                bound = getattr(m, name)
                ends.append(bound if name != "gt" else (bound + 1e-9 if isinstance(bound, float) else bound + 1))
    assert len(ends) == 2, ends
    for value in ends:
        Settings(**{field: value}).sampling()
