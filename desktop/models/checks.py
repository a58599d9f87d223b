"""The check a model passes before it replaces the loaded one: the model manager refuses a folder
that is not a model, a GGUF of an architecture that does not run here, a truncated file and a
model that needs custom code with a sentence, before the running model is touched."""

from __future__ import annotations

from pathlib import Path

from desktop.models.facts import read_folder
from desktop.models.gguf_facts import read_gguf


def problem(source: str) -> str:
    """"" when `source` (a model_source) looks loadable, else the sentence that names the problem."""
    if source == "default" or source.startswith("tiny"):
        return ""
    path = Path(source).expanduser()
    if not path.exists():
        return f"No model at {path}: the path does not exist."
    if path.is_dir():
        if (path / "config.json").exists():
            return read_folder(path).problem
        ggufs = [p for p in path.glob("*.gguf") if not p.name.lower().startswith("mmproj")]
        if len(ggufs) == 1:
            return read_gguf(ggufs[0]).problem
        return (f"{path} holds several GGUF files: choose one of them." if ggufs else
                f"{path} is not a model: it has no config.json and no .gguf file.")
    return read_gguf(path).problem
