"""Presets hold a voice and a speaking rate: files saved before they had them still load (the
Settings' voice, the normal rate), a bad value falls back alone, and they are saved and changed."""

from __future__ import annotations

import json

import pytest

from desktop.chat.presets import Preset, PresetStore


def test_an_old_presets_file_loads_with_the_settings_voice(tmp_path):
    old = {"version": 1, "presets": [{"id": "user-old", "name": "Old", "prompt": "Be kind."}]}
    (tmp_path / "presets.json").write_text(json.dumps(old))
    store = PresetStore(tmp_path)
    assert store.notice is None
    preset = store.get("user-old")
    assert (preset.prompt, preset.voice, preset.rate) == ("Be kind.", None, 1.0)
    assert preset.speech() == (None, None, 1.0)  # the Settings' engine and voice, at its own pace
    assert all(p.voice is None and p.rate == 1.0 for p in store.list() if p.builtin)


def test_voice_and_rate_are_saved_changed_and_read_back(tmp_path):
    store = PresetStore(tmp_path)
    fast = store.add("Fast", "Answer briefly.", voice="espeak:en-us", rate=1.4)
    assert fast.speech() == ("espeak", "en-us", 1.4)
    assert PresetStore(tmp_path).get(fast.id) == fast
    store.update(fast.id, prompt="Answer very briefly.")  # the voice stays
    again = PresetStore(tmp_path).get(fast.id)
    assert (again.prompt, again.voice, again.rate) == ("Answer very briefly.", "espeak:en-us", 1.4)
    store.update(fast.id, voice=None, rate=0.8)
    assert PresetStore(tmp_path).get(fast.id).speech() == (None, None, 0.8)
    assert Preset("x", "X", "", voice="piper:").speech() == ("piper", None, 1.0)  # the engine's default voice


def test_a_bad_voice_or_rate_falls_back_alone(tmp_path):
    items = [{"id": "user-a", "name": "A", "prompt": "a", "voice": 7, "rate": 1.2},
             {"id": "user-b", "name": "B", "prompt": "b", "voice": "piper:joe_us", "rate": 9},
             {"id": "user-c", "name": "C", "prompt": "c", "voice": ":x", "rate": True}]
    (tmp_path / "presets.json").write_text(json.dumps({"version": 1, "presets": items}))
    store = PresetStore(tmp_path)
    assert store.notice is None
    assert [(store.get(i).voice, store.get(i).rate) for i in ("user-a", "user-b", "user-c")] == [
        (None, 1.2), ("piper:joe_us", 1.0), (None, 1.0)]
    with pytest.raises(ValueError):
        store.add("Too fast", "x", rate=3.0)
