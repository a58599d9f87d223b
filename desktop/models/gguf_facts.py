"""A GGUF file's facts from its header, read with the `gguf` package's reader (memory-mapped: the
weights are not read): architecture, name, parameters, quantisation, and whether the file is whole
(a truncated download ends before its last tensor) and of an architecture that loads here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from desktop.models.facts import Kind, ModelFacts

# GGUF architectures that load as a text model here (transformers' GGUF loader; see the test that
# holds this list against the installed transformers). llama.cpp names some differently.
SUPPORTED = frozenset({
    "llama", "mistral", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3", "falcon", "gpt2",
    "stablelm", "starcoder2", "nemotron", "deci", "lfm2", "bloom",
})
PROJECTORS = frozenset({"clip", "mmproj"})  # vision projectors beside a model, not models


def read_gguf(path: Path) -> ModelFacts:
    """The facts of one .gguf file; a file that cannot be loaded gets its problem sentence."""
    size = _size(path)
    facts = ModelFacts(str(path), Kind.GGUF, path.stem, size_bytes=size)
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        return replace(facts, problem=f"{path.name} cannot be read: {exc.strerror or exc}.")
    if magic != b"GGUF":
        return replace(facts, problem=f"{path.name} is not a GGUF file: it does not start with the GGUF header.")
    try:
        from gguf import GGUFReader

        reader = GGUFReader(path, "r")
    except (ValueError, IndexError, OSError, KeyError) as exc:  # the reader's way of saying "ends too early"
        return replace(facts, problem=f"{path.name} is truncated or damaged ({_short(exc)}): download it again.")
    arch = _text(reader, "general.architecture")
    facts = replace(facts, name=_text(reader, "general.name") or path.stem, family=arch,
                    params=sum(int(t.n_elements) for t in reader.tensors), quant=_quant(reader),
                    vision=_has_projector(path))
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > size:
        return replace(facts, problem=f"{path.name} is truncated: it ends at {size:,} bytes but its weights "
                                      f"need {end:,}. Download it again.")
    if arch in PROJECTORS:
        return replace(facts, problem=f"{path.name} is a vision projector, not a model: it is used beside one.")
    if arch not in SUPPORTED:
        return replace(facts, problem=f"{path.name} is a {arch or 'unnamed'} model, an architecture Omnidesk "
                                      "cannot run. Choose another model.")
    if not reader.tensors:
        return replace(facts, problem=f"{path.name} holds no weights.")
    return facts


def is_projector(path: Path) -> bool:
    return path.name.lower().startswith("mmproj")


def _has_projector(path: Path) -> bool:
    try:
        return any(is_projector(p) for p in path.parent.glob("*.gguf"))
    except OSError:
        return False


def _text(reader, key: str) -> str:
    field = reader.fields.get(key)
    try:
        value = field.contents() if field is not None else ""
    except (ValueError, IndexError, UnicodeDecodeError):
        return ""
    return value if isinstance(value, str) else ""


def _quant(reader) -> str:
    from gguf import LlamaFileType

    field = reader.fields.get("general.file_type")
    if field is not None:
        try:
            return LlamaFileType(int(field.contents())).name.removeprefix("MOSTLY_").removeprefix("ALL_")
        except (ValueError, TypeError):
            pass
    counts: dict[str, int] = {}
    for t in reader.tensors:  # no file type written: the type most weights use
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + int(t.n_elements)
    return max(counts, key=lambda k: counts[k]) if counts else ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:80]
