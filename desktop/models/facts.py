"""One model on disk as the model manager shows it: name, family, parameters, quantisation, size,
whether it sees images, and — where it cannot be loaded — the sentence that says why. A Hugging
Face folder is read from its config.json and the safetensors headers (no torch, no weights read)."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from desktop.safefile import load_json

MAX_CONFIG_BYTES = 4 << 20
MAX_HEADER_BYTES = 100 << 20  # a safetensors header is JSON; anything larger is not one
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")
DTYPE_BITS = {"F64": 64, "F32": 32, "F16": 16, "BF16": 16, "I64": 64, "I32": 32, "I16": 16, "I8": 8, "U8": 8,
              "BOOL": 8, "F8_E4M3": 8, "F8_E5M2": 8}


class Kind(str, Enum):
    EMBEDDED = "embedded"
    FOLDER = "folder"  # a Hugging Face model folder (config.json + safetensors)
    GGUF = "gguf"


@dataclass(frozen=True)
class ModelFacts:
    """`source` is what Settings.model_source takes to load it ("default" for the embedded one).
    `problem`: why it cannot be loaded, as a sentence ("" when it can)."""

    source: str
    kind: Kind
    name: str
    where: str = ""  # the place it was found: "Embedded", "Hugging Face cache", "LM Studio", …
    family: str = ""
    params: int = 0  # 0: unknown
    quant: str = ""
    size_bytes: int = 0
    vision: bool = False
    problem: str = ""

    def placed(self, where: str, name: str | None = None) -> ModelFacts:
        return replace(self, where=where, name=name or self.name)


def read_folder(folder: Path) -> ModelFacts:
    """A Hugging Face model folder's facts; a folder that is not a loadable model gets its problem."""
    name = folder.name
    bad = ModelFacts(str(folder), Kind.FOLDER, name, size_bytes=_folder_size(folder))
    try:
        config = load_json(folder / "config.json", MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return replace(bad, problem=f"{folder} is not a model folder: it has no config.json.")
    except (OSError, ValueError) as exc:
        return replace(bad, problem=f"{folder / 'config.json'} is not readable JSON ({exc}).")
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        return replace(bad, problem=f"{folder / 'config.json'} is not a model configuration (it names no model_type).")
    family = config["model_type"]
    weights = sorted(folder.glob("*.safetensors"))
    params, bits = _safetensors_params(weights)
    facts = replace(bad, family=family, params=params, quant=_quant(config, bits), vision=_sees_images(config))
    if "auto_map" in config:
        return replace(facts, problem=f"{name} needs custom code from its authors (trust_remote_code), which "
                                      "Omnidesk does not run. Choose another model.")
    if not weights:
        return replace(facts, problem=f"{name} has a config.json but no weights (*.safetensors): it is incomplete.")
    if params == 0:
        return replace(facts, problem=f"The weights of {name} are damaged: a .safetensors header could not be read.")
    if not any((folder / n).is_file() for n in TOKENIZER_FILES):
        return replace(facts, problem=f"{name} has no tokenizer (tokenizer.json): copy the model's tokenizer files into it.")
    return facts


def _sees_images(config: dict) -> bool:
    archs = " ".join(a for a in config.get("architectures") or [] if isinstance(a, str))
    return "vision_config" in config or "ForConditionalGeneration" in archs or "ImageTextToText" in archs


def _quant(config: dict, bits: dict[str, int]) -> str:
    q = config.get("quantization_config")
    if isinstance(q, dict) and q.get("quant_method"):
        detail = q.get("bits") or q.get("weight_dtype") or ""
        return f"{q['quant_method']}{f' {detail}-bit' if isinstance(detail, int) else ''}".upper()
    if bits:
        return max(bits, key=lambda k: bits[k])  # the dtype most weights use: BF16, F16, F32
    dtype = config.get("torch_dtype") or config.get("dtype")
    return str(dtype).upper() if dtype else ""


def _safetensors_params(files: list[Path]) -> tuple[int, dict[str, int]]:
    """(elements in all tensors, elements per dtype) from the files' headers; (0, {}) when any
    header is damaged (a truncated file whose data ends before its header says)."""
    total, per_dtype = 0, {}
    for path in files:
        try:
            with path.open("rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                if n > MAX_HEADER_BYTES:
                    return 0, {}
                header = json.loads(f.read(n))
            size = path.stat().st_size
        except (OSError, ValueError, struct.error):
            return 0, {}
        end = 0
        for key, entry in header.items():
            if key == "__metadata__" or not isinstance(entry, dict):
                continue
            count = 1
            for dim in entry.get("shape", []):
                count *= int(dim)
            total += count
            dtype = str(entry.get("dtype", ""))
            per_dtype[dtype] = per_dtype.get(dtype, 0) + count
            end = max(end, int(entry.get("data_offsets", [0, 0])[1]))
        if 8 + n + end > size:  # the file ends before its last tensor does
            return 0, {}
    return total, per_dtype


def _folder_size(folder: Path) -> int:
    try:
        return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    except OSError:
        return 0


def human_params(n: int) -> str:
    if n <= 0:
        return "?"
    if n >= 1e9:
        return f"{n / 1e9:.1f}B"
    return f"{n / 1e6:.0f}M" if n >= 1e6 else f"{n / 1e3:.0f}K" if n >= 1e3 else str(n)


def human_bytes(n: float) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"
