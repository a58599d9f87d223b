"""The Models page in the app (tiny model): it lists what is on disk, Load goes through the
settings as Settings → Model does, a model that cannot load is refused with a sentence and the
loaded one untouched (one that fails in the worker gives way to the one before), Unload frees it
(Admin follows) and Load brings it back, and the idle setting unloads it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from desktop.composition import Composition
from desktop.errors import OmnideskError
from desktop.models.places import Places
from desktop.settings import Settings
from tests.models.model_files import write_gguf


@pytest.fixture
def env(tmp_path, monkeypatch):
    for name in ("CONFIG", "DATA", "LOG", "CACHE"):  # CACHE: the KV snapshots too
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    # only the test's folder is looked at: no HF cache, LM Studio or Ollama of this machine
    monkeypatch.setattr(Places, "default", classmethod(lambda cls, folder="", home=None: Places(models_folder=tmp_path / "models")))
    monkeypatch.setattr("desktop.composition._embedded_gguf", lambda: None)
    return tmp_path


@pytest.fixture
def comp(env, qapp, aloop):
    path = env / "config" / "settings.json"
    comp = Composition(qapp, Settings(model_source="tiny", models_folder=str(env / "models")), settings_path=path)
    comp.start()
    aloop.run(comp.wait_ready(60))
    yield comp
    aloop.run(comp.shutdown(), 30)


def test_bad_models_are_refused_and_the_loaded_one_stays(comp, env, aloop, qtbot):
    write_gguf(env / "models" / "ok" / "tiny-Q8_0.gguf")
    unsupported = write_gguf(env / "models" / "w" / "whisper.gguf", arch="whisper")
    truncated = write_gguf(env / "models" / "t" / "cut.gguf")
    truncated.write_bytes(truncated.read_bytes()[:-2000])
    not_a_model = env / "models" / "photos"
    not_a_model.mkdir()
    page = comp.window.pages["models"]

    async def show_and_scan() -> None:  # the first showing scans (a task on the app's loop)
        comp.window.show_page("models")
        for _ in range(500):
            if page.table.rowCount() == 3:
                return
            await asyncio.sleep(0.02)

    aloop.run(show_and_scan())
    assert page.table.rowCount() == 3
    if Path("/work/notes/shots").is_dir():
        comp.window.resize(1100, 740)
        page.view.selectRow(page.table.row_of(str(unsupported)))
        comp.window.grab().save("/work/notes/shots/manager-window.png")
    problems = sorted(r.problem.split(" ")[0] for r in page.table.rows if r.problem)
    assert problems == ["cut.gguf", "whisper.gguf"]  # the folder of photos is no model: not listed
    gateway = comp.gateway
    for source, words in ((unsupported, "cannot run"), (truncated, "truncated"), (not_a_model, "not a model")):
        assert aloop.run(comp.models.load(str(source))) is False
        assert words in comp.window.status.toolTip()  # the status bar's message, in full
        assert comp.gateway is gateway and comp.model_name == "omnidesk-tiny" and comp.settings.model_source == "tiny"


async def _turn(comp, messages):
    from desktop.model.params import SamplingParams
    from desktop.protocol import Done

    end = None
    async for event in comp.gateway.chat(messages, SamplingParams(max_tokens=6, temperature=0.0), conversation="c1"):
        end = event
    assert isinstance(end, Done), end
    return end


def test_unload_frees_the_model_and_load_brings_it_back_with_its_cache(comp, aloop, qtbot):
    from desktop.model.messages import Message

    page = comp.window.pages["models"]
    history = [Message("system", "You help."), Message("user", "Tell me about gulls. " * 40)]
    first = aloop.run(_turn(comp, history))
    states = []
    comp.engine_state.connect(states.append)
    aloop.run(comp.models.unload())
    assert comp.gateway is None and comp.model_name is None and comp.snapshot() is None  # Admin shows no workers
    assert states[-1] == "unloaded" and "No model is loaded" in page.loaded_label.text()
    assert not page.unload_button.isEnabled()
    with pytest.raises(OmnideskError, match="Models page"):  # a chat sent now says where to load one
        comp.proxy.chat([{"role": "user", "content": "hi"}])
    comp.window.actions["page_models"].trigger()  # Ctrl+5
    assert comp.window.current_page == "models"

    async def load_and_wait():
        return await comp.models.load("tiny"), await comp.wait_ready(60)

    assert aloop.run(load_and_wait()) == (True, True)
    assert comp.model_name == "omnidesk-tiny" and states[-1] == "ready" and page.unload_button.isEnabled()
    follow = history + [Message("assistant", first.text), Message("user", "And terns?")]
    second = aloop.run(_turn(comp, follow))  # the cache badge follows: the history comes back from disk
    assert second.stats.kind == "disk" and second.stats.cached_tokens >= first.stats.input_tokens, second.stats


def test_the_model_is_unloaded_after_the_idle_minutes(comp, aloop):
    comp.models.tick(time.monotonic())
    assert comp.gateway is not None  # 0 minutes: never
    comp.models._idle_changed(5)
    now = time.monotonic()
    comp.models.tick(now + 4 * 60)
    assert comp.gateway is not None
    comp.models.tick(now + 5 * 60 + 1)
    aloop.run(_settle(comp))
    assert comp.gateway is None and comp.models.unloaded
    assert comp.settings.idle_unload_minutes == 5


async def _settle(comp):
    for _ in range(200):
        if comp.gateway is None:
            return
        await asyncio.sleep(0.02)


@pytest.mark.slow  # two loads in a worker process (torch and transformers imported there): ≈ 20 s
def test_load_switches_through_the_settings_and_a_failing_model_gives_way(comp, env, aloop):
    from tests.models.model_files import write_folder

    async def load_and_wait(source):
        return await comp.models.load(source), await comp.wait_ready(60)

    assert aloop.run(load_and_wait("tiny-vlm"), 120) == (True, True)  # as Settings → Model would
    assert comp.settings.model_source == "tiny-vlm" and comp.engine.supports_images
    assert json.loads((env / "config" / "settings.json").read_text())["model_source"] == "tiny-vlm"

    folder = write_folder(env / "models" / "odd", model_type="nosuchmodel")  # passes the check, not the loader
    states = []
    comp.engine_state.connect(states.append)
    assert aloop.run(load_and_wait(str(folder)), 120) == (False, True)
    assert "failed" in states and states[-1] == "ready"
    assert comp.settings.model_source == "tiny-vlm" and comp.engine.supports_images
    said = comp.window.status.toolTip()
    assert "odd could not be loaded" in said and "nosuchmodel" in said and "loaded before is back" in said
