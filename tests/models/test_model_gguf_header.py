"""The fast GGUF header reader agrees with the `gguf` package's GGUFReader: values, tensor sizes
and offsets (quantised tensors, arrays of strings, a custom alignment), and says when a file ends
inside its header."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.quants import quantize

from desktop.model.gguf_header import Truncated, read_header


def _write(path: Path, alignment: int | None = None) -> Path:
    w = GGUFWriter(str(path), "qwen2")
    w.add_name("Header Test")
    w.add_file_type(7)
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_token_list([f"tok{i}" for i in range(300)] + ["ü", ""])
    w.add_token_scores([0.5] * 302)
    w.add_array("test.nested", [[1, 2], [3]])
    w.add_tensor("a", np.ones((8, 64), np.float32))
    q = quantize(np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32), GGMLQuantizationType.Q8_0)
    w.add_tensor("b", q, raw_dtype=GGMLQuantizationType.Q8_0)
    w.add_tensor("c", np.zeros((3,), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("alignment", [None, 64])
def test_the_header_agrees_with_gguf_reader(tmp_path: Path, alignment):
    path = _write(tmp_path / "h.gguf", alignment)
    mine, theirs = read_header(path), GGUFReader(path)
    assert mine.values["general.architecture"] == "qwen2" and mine.values["general.name"] == "Header Test"
    assert mine.values["general.file_type"] == 7 and mine.values["tokenizer.ggml.tokens"] == 302
    got = [(t.name, t.type, t.n_elements, t.n_bytes, t.offset) for t in mine.tensors]
    want = [(t.name, t.tensor_type, int(t.n_elements), int(t.n_bytes), int(t.data_offset)) for t in theirs.tensors]
    assert got == want
    assert mine.data_end == max(o + n for *_, n, o in want)


def test_a_file_cut_inside_its_header_is_truncated(tmp_path: Path):
    path = _write(tmp_path / "h.gguf")
    data = path.read_bytes()
    for cut in (0, 10, 30, 200, 2000):
        path.write_bytes(data[:cut])
        with pytest.raises(Truncated):
            read_header(path)
