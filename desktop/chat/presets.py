"""Presets: a system prompt with the voice that speaks it and its speaking rate; read-only built-ins
from assets/presets.json plus the user's own, saved as presets.json in the user data folder (add,
edit, delete). Chats and calls use them. No Qt."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from desktop.chat.conversations import data_dir
from desktop.safefile import clean_stale_temps, load_json, set_aside, write_atomic

log = logging.getLogger(__name__)

BUILTIN_PATH = Path(__file__).resolve().parents[2] / "assets" / "presets.json"
# Used only when the asset file is missing (e.g. an install that did not ship assets/).
MAX_BYTES = 4 << 20  # the presets file; a larger one is set aside unread
RATES = (0.5, 2.0)  # speaking rate: a multiple of the voice's own pace


class KEEP:
    """`PresetStore.update(voice=KEEP)`: the voice stays as it is."""


_FALLBACK = [{"id": "assistant", "name": "Assistant", "prompt": "You are a helpful, honest assistant."}]


@dataclass(frozen=True, slots=True)
class Preset:
    """`voice`: "engine:voice" ("piper:joe_us", "espeak:en-us"), or None for the voice chosen in
    Settings (what presets saved before they had a voice get); `rate`: the speaking rate, a
    multiple of the voice's own pace."""

    id: str
    name: str
    prompt: str
    builtin: bool = False
    voice: str | None = None
    rate: float = 1.0

    def __post_init__(self) -> None:
        if self.voice is not None and not split_voice(self.voice)[0]:
            raise ValueError(f"a preset's voice is 'engine:voice' (got {self.voice!r})")
        if isinstance(self.rate, bool) or not isinstance(self.rate, (int, float)) or not RATES[0] <= self.rate <= RATES[1]:
            raise ValueError(f"a preset's rate is between {RATES[0]} and {RATES[1]} (got {self.rate!r})")

    def speech(self) -> tuple[str | None, str | None, float]:
        """(engine, voice, rate) for `Voice.use`: engine None is the Settings' engine and voice."""
        engine, voice = split_voice(self.voice) if self.voice is not None else (None, None)
        return engine, voice, self.rate


def split_voice(voice: str) -> tuple[str, str | None]:
    """"piper:joe_us" → ("piper", "joe_us"); "espeak:" → ("espeak", None), the engine's default."""
    engine, _, name = voice.partition(":")
    return engine, name or None


def _parse(data: object, builtin: bool) -> list[Preset]:
    items = data.get("presets") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ValueError("no 'presets' list")
    out = []
    for p in items:
        if not isinstance(p, dict) or not all(isinstance(p.get(k), str) for k in ("id", "name", "prompt")):
            raise ValueError("a preset needs string id, name and prompt")
        out.append(Preset(p["id"], p["name"], p["prompt"], builtin, *_speech(p)))
    return out


def _speech(p: dict) -> tuple[str | None, float]:
    """A preset's voice and rate; absent (files saved before presets had them) or unusable, each
    falls back alone to the Settings' voice and the normal rate."""
    voice, rate = p.get("voice"), p.get("rate", 1.0)
    if not (isinstance(voice, str) and split_voice(voice)[0]):
        voice = None
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not RATES[0] <= rate <= RATES[1]:
        rate = 1.0
    return voice, float(rate)


def load_builtin(path: Path = BUILTIN_PATH) -> list[Preset]:
    try:
        return _parse(load_json(path, MAX_BYTES), builtin=True)
    except (OSError, ValueError) as exc:
        log.warning("Built-in presets unavailable (%s): %s; using a minimal default", path, exc)
        return _parse({"presets": _FALLBACK}, builtin=True)


class PresetStore:
    """Built-in presets first, then the user's. Built-ins cannot be changed (ValueError)."""

    def __init__(self, root: Path | str | None = None, builtin_path: Path = BUILTIN_PATH) -> None:
        self.path = Path(root if root is not None else data_dir()) / "presets.json"
        self._builtin = load_builtin(builtin_path)
        self._user: list[Preset] = []
        self.notice: str | None = None  # for the user, when the file had to be set aside
        clean_stale_temps(self.path.parent)
        try:
            self._user = _parse(load_json(self.path, MAX_BYTES), builtin=False)
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            try:
                aside: Path | str = set_aside(self.path)
            except OSError as err:
                aside = f"{self.path} (it could not be moved: {err})"
            self.notice = f"Your presets file could not be read ({exc}); it was kept as {aside}."
            log.warning("%s", self.notice)

    def list(self) -> list[Preset]:
        return [*self._builtin, *self._user]

    def get(self, preset_id: str) -> Preset | None:
        return next((p for p in self.list() if p.id == preset_id), None)

    def add(self, name: str, prompt: str, *, voice: str | None = None, rate: float = 1.0) -> Preset:
        """Save a new user preset; its id is made from the name and is unique."""
        name = self._check_name(name)
        base = "user-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "preset")
        ids = {p.id for p in self.list()}
        pid, n = base, 2
        while pid in ids:
            pid, n = f"{base}-{n}", n + 1
        preset = Preset(pid, name, prompt, voice=voice, rate=rate)
        self._user.append(preset)
        self._save()
        return preset

    def update(self, preset_id: str, *, name: str | None = None, prompt: str | None = None,
               voice: str | None | type[KEEP] = KEEP, rate: float | None = None) -> Preset:
        """Change a user preset; what is not given stays (`voice=None`: the Settings' voice)."""
        i = self._user_index(preset_id)
        old = self._user[i]
        self._user[i] = Preset(old.id, self._check_name(name) if name is not None else old.name,
                               prompt if prompt is not None else old.prompt,
                               voice=old.voice if voice is KEEP else voice,  # type: ignore[arg-type]
                               rate=rate if rate is not None else old.rate)
        self._save()
        return self._user[i]

    def delete(self, preset_id: str) -> None:
        del self._user[self._user_index(preset_id)]
        self._save()

    def _user_index(self, preset_id: str) -> int:
        if any(p.id == preset_id for p in self._builtin):
            raise ValueError("Built-in presets cannot be changed; save a copy under a new name instead.")
        for i, p in enumerate(self._user):
            if p.id == preset_id:
                return i
        raise KeyError(f"No preset {preset_id!r}.")

    @staticmethod
    def _check_name(name: str) -> str:
        name = " ".join(name.split())
        if not name:
            raise ValueError("A preset needs a name.")
        return name

    def _save(self) -> None:
        data = {"version": 1, "presets": [{"id": p.id, "name": p.name, "prompt": p.prompt, "voice": p.voice,
                                           "rate": p.rate} for p in self._user]}
        write_atomic(self.path, json.dumps(data, ensure_ascii=False, indent=1))
