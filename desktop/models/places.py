"""Where models are looked for: the Hugging Face cache, the models folder the user picked, LM
Studio's two folders and Ollama's manifests. `Places.default` reads them from the environment and
the home folder; tests pass their own."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

MAX_DEPTH = 4  # publisher/repo/file.gguf and a little more: deeper folders are not walked
MAX_MANIFEST_BYTES = 1 << 20
OLLAMA_MODEL = "application/vnd.ollama.image.model"


@dataclass(frozen=True)
class Places:
    hf_cache: Path | None = None
    models_folder: Path | None = None
    lm_studio: tuple[Path, ...] = ()
    ollama: Path | None = None

    @classmethod
    def default(cls, models_folder: str = "", home: Path | None = None) -> Places:
        home = home or Path.home()
        return cls(hf_cache=hf_cache_dir(), models_folder=Path(models_folder).expanduser() if models_folder else None,
                   lm_studio=(home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"),
                   ollama=Path(os.environ.get("OLLAMA_MODELS") or home / ".ollama" / "models"))


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache",
                                                     "huggingface")
    return Path(home).expanduser() / "hub"


def hf_cache_models(cache: Path) -> Iterator[tuple[str, Path]]:
    """(repo id, snapshot folder) for each model repo in the cache: the snapshot `refs/main`
    points to, else the newest one."""
    try:
        repos = sorted(p for p in cache.iterdir() if p.is_dir() and p.name.startswith("models--"))
    except OSError:
        return
    for repo in repos:
        repo_id = repo.name.removeprefix("models--").replace("--", "/")
        snapshots = repo / "snapshots"
        try:
            ref = (repo / "refs" / "main").read_text().strip()
        except OSError:
            ref = ""
        chosen = snapshots / ref if ref and (snapshots / ref).is_dir() else None
        if chosen is None:
            try:
                found = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
            except OSError:
                continue
            chosen = found[-1] if found else None
        if chosen is not None:
            yield repo_id, chosen


def walk_models(root: Path) -> Iterator[Path]:
    """Model folders (with config.json) and .gguf files under `root`, at most MAX_DEPTH deep; a
    model folder is not walked further. Hidden folders (a download's .cache) are skipped."""
    def walk(folder: Path, depth: int) -> Iterator[Path]:
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return
        if any(e.name == "config.json" for e in entries):
            yield folder
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.suffix.lower() == ".gguf" and entry.is_file():
                yield entry
            elif depth < MAX_DEPTH and entry.is_dir() and not (folder / "config.json").is_file():
                yield from walk(entry, depth + 1)

    if root.is_dir():
        yield from walk(root, 1)


def ollama_models(root: Path) -> Iterator[tuple[str, Path]]:
    """(name:tag, blob) for each Ollama manifest whose model layer's blob is on disk."""
    manifests = root / "manifests"
    if not manifests.is_dir():
        return
    for manifest in sorted(p for p in manifests.rglob("*") if p.is_file()):
        try:
            if manifest.stat().st_size > MAX_MANIFEST_BYTES:
                continue
            layers = json.loads(manifest.read_text()).get("layers", [])
        except (OSError, ValueError, AttributeError):
            continue
        digest = next((layer.get("digest", "") for layer in layers
                       if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL), "")
        blob = root / "blobs" / digest.replace(":", "-")
        if digest and blob.is_file():
            rel = manifest.relative_to(manifests).parts
            name = rel[-2] if len(rel) >= 2 else rel[-1]
            owner = rel[-3] if len(rel) >= 3 and rel[-3] != "library" else ""
            yield f"{owner + '/' if owner else ''}{name}:{rel[-1]}", blob
