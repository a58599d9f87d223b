"""A GGUF file's header read fast: the metadata values the model manager shows (strings and
numbers; arrays — the tokenizer's vocabulary — are stepped over, not decoded) and each tensor's
element count, type and end. The `gguf` package's GGUFReader decodes every array element into
numpy (≈ 10 s for the embedded model's header on a busy 2-core machine); this takes milliseconds.
Its types and block sizes come from the `gguf` package; tests hold the results against GGUFReader."""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

from gguf import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType, GGUFValueType

SCALARS = {GGUFValueType.UINT8: "<B", GGUFValueType.INT8: "<b", GGUFValueType.UINT16: "<H",
           GGUFValueType.INT16: "<h", GGUFValueType.UINT32: "<I", GGUFValueType.INT32: "<i",
           GGUFValueType.FLOAT32: "<f", GGUFValueType.BOOL: "<?", GGUFValueType.UINT64: "<Q",
           GGUFValueType.INT64: "<q", GGUFValueType.FLOAT64: "<d"}
MAX_DIMS = 8


class Truncated(ValueError):
    """The file ends inside its header."""


@dataclass
class Tensor:
    name: str
    type: GGMLQuantizationType
    n_elements: int
    n_bytes: int
    offset: int  # from the file's start


@dataclass
class Header:
    values: dict[str, object] = field(default_factory=dict)  # scalars and strings; arrays as their length
    tensors: list[Tensor] = field(default_factory=list)

    @property
    def data_end(self) -> int:
        return max((t.offset + t.n_bytes for t in self.tensors), default=0)


def read_header(path: Path) -> Header:
    """The header of a GGUF file (ValueError: not GGUF or not a version this reads; Truncated)."""
    with path.open("rb") as f:
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as exc:  # an empty file
            raise Truncated("the file is empty") from exc
        with mm:
            try:
                return _parse(mm)
            except (struct.error, IndexError) as exc:
                raise Truncated("the file ends inside its header") from exc


def _parse(buf: mmap.mmap) -> Header:
    if buf[:4] != b"GGUF":
        raise ValueError("no GGUF magic")
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", buf, 4)
    if version < 2:
        raise ValueError(f"GGUF version {version} is too old")
    pos, header = 24, Header()
    for _ in range(n_kv):
        key, pos = _string(buf, pos)
        (kind,), pos = struct.unpack_from("<I", buf, pos), pos + 4
        header.values[key], pos = _value(buf, pos, GGUFValueType(kind))
    infos = []
    for _ in range(n_tensors):
        name, pos = _string(buf, pos)
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        if n_dims > MAX_DIMS:
            raise ValueError(f"tensor {name} has {n_dims} dimensions")
        dims = struct.unpack_from(f"<{n_dims}Q", buf, pos + 4)
        kind, offset = struct.unpack_from("<IQ", buf, pos + 4 + 8 * n_dims)
        pos += 4 + 8 * n_dims + 12
        infos.append((name, dims, GGMLQuantizationType(kind), offset))
    align = int(header.values.get("general.alignment", GGUF_DEFAULT_ALIGNMENT))  # type: ignore[call-overload]
    start = (pos + align - 1) // align * align
    for name, dims, kind, offset in infos:
        count = 1
        for d in dims:
            count *= d
        block, size = GGML_QUANT_SIZES[kind]
        header.tensors.append(Tensor(name, kind, count, count // block * size, start + offset))
    return header


def _string(buf: mmap.mmap, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<Q", buf, pos)
    end = pos + 8 + n
    if end > len(buf):
        raise IndexError("string past the end")
    return buf[pos + 8:end].decode("utf-8", errors="replace"), end


def _value(buf: mmap.mmap, pos: int, kind: GGUFValueType) -> tuple[object, int]:
    if kind == GGUFValueType.STRING:
        return _string(buf, pos)
    if kind in SCALARS:
        fmt = SCALARS[kind]
        return struct.unpack_from(fmt, buf, pos)[0], pos + struct.calcsize(fmt)
    if kind == GGUFValueType.ARRAY:  # stepped over: its length stands for it
        item, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        item = GGUFValueType(item)
        if item in SCALARS:
            pos += count * struct.calcsize(SCALARS[item])
        elif item == GGUFValueType.STRING:
            for _ in range(count):
                (n,) = struct.unpack_from("<Q", buf, pos)
                pos += 8 + n
        else:
            for _ in range(count):
                _, pos = _value(buf, pos, item)
        if pos > len(buf):
            raise IndexError("array past the end")
        return count, pos
    raise ValueError(f"unknown GGUF value type {kind}")
