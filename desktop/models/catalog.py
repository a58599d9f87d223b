"""The models on disk, as one list: the embedded model first, then every Hugging Face folder and
GGUF file found in the places (places.py), each once. Facts are kept per file (size and mtime), so
a second scan reads only what changed. Blocking (reads headers): run it off the UI thread."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable

from desktop.bounded import BoundedDict
from desktop.models.facts import Kind, ModelFacts, read_folder
from desktop.models.gguf_facts import is_projector, read_gguf
from desktop.models.places import Places, hf_cache_models, ollama_models, walk_models

log = logging.getLogger(__name__)
EMBEDDED_NAME = "SmolLM2 135M (embedded)"


class Catalog:
    """`scan()` → the list. `embedded()` gives the embedded model's GGUF (None when it is not
    installed); `places()` the places to look in (read at each scan: the models folder is a setting)."""

    def __init__(self, places: Callable[[], Places], embedded: Callable[[], Path | None]) -> None:
        self._places, self._embedded = places, embedded
        self._memo: BoundedDict = BoundedDict(512)  # (path, size, mtime) → facts
        self._lock = threading.Lock()  # one scan at a time (F5 pressed twice)

    def scan(self) -> list[ModelFacts]:
        with self._lock:
            return self._scan()

    def _scan(self) -> list[ModelFacts]:
        found: list[ModelFacts] = []
        seen: set[Path] = set()

        def add(path: Path, where: str, name: str | None = None) -> None:
            key = _real(path)
            if key in seen or (path.suffix.lower() == ".gguf" and is_projector(path)):
                return
            seen.add(key)
            found.append(self.facts(path).placed(where, name))

        embedded = self._embedded()
        if embedded is not None:
            seen.add(_real(embedded))
            found.append(replace(self.facts(embedded), source="default", kind=Kind.EMBEDDED, name=EMBEDDED_NAME,
                                 where="Embedded"))
        places = self._places()
        if places.models_folder is not None:
            for path in walk_models(places.models_folder):
                add(path, "Models folder")
        if places.hf_cache is not None:
            for repo_id, folder in hf_cache_models(places.hf_cache):
                if (folder / "config.json").exists():
                    add(folder, "Hugging Face cache", repo_id)
                for gguf in sorted(folder.glob("*.gguf")):
                    add(gguf, "Hugging Face cache", f"{repo_id}/{gguf.name}")
        for root in places.lm_studio:
            for path in walk_models(root):
                add(path, "LM Studio")
        if places.ollama is not None:
            for name, blob in ollama_models(places.ollama):
                add(blob, "Ollama", name)
        return found

    def facts(self, path: Path) -> ModelFacts:
        """One model's facts (remembered while its size and mtime stay the same)."""
        try:
            st = path.stat()
            key = (str(path), st.st_size, st.st_mtime_ns)
        except OSError:
            key = None
        if key is not None and key in self._memo:
            return self._memo[key]
        facts = read_folder(path) if path.is_dir() else read_gguf(path)
        if key is not None:
            self._memo[key] = facts
        return facts


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path
