"""What the user types for a download (a repo id or a Hub URL) and the choices a repo's files make."""

from __future__ import annotations

import pytest

from desktop.models.hub import HubFile, Request, choices, parse, quant_of


@pytest.mark.parametrize("text, want", [
    ("Qwen/Qwen2.5-1.5B-Instruct-GGUF", Request("Qwen/Qwen2.5-1.5B-Instruct-GGUF")),
    ("https://huggingface.co/org/m", Request("org/m")),
    ("https://huggingface.co/org/m/tree/dev", Request("org/m", "dev")),
    ("https://huggingface.co/org/m/blob/main/m-Q4_K_M.gguf", Request("org/m", "main", "m-Q4_K_M.gguf")),
    ("https://hf.co/models/org/m/resolve/main/sub/x.gguf?download=true", Request("org/m", "main", "sub/x.gguf")),
])
def test_repo_ids_and_urls_are_read(text, want):
    assert parse(text) == want


@pytest.mark.parametrize("text", ["", "just-a-name", "a/b/c", "https://huggingface.co/", "org/has space"])
def test_what_is_not_a_repo_is_refused_with_a_sentence(text):
    with pytest.raises(ValueError, match="repo|address"):
        parse(text)


def test_a_gguf_repo_offers_one_choice_per_quantisation_with_its_projector():
    files = [HubFile("README.md", 10), HubFile("m-Q8_0.gguf", 800), HubFile("m-Q4_K_M.gguf", 400),
             HubFile("mmproj-m-f16.gguf", 50)]
    got = choices(files)
    assert [c.files[0].path for c in got] == ["m-Q4_K_M.gguf", "m-Q8_0.gguf"]  # smallest first
    assert all(c.files[1].path == "mmproj-m-f16.gguf" for c in got)
    assert got[0].label.startswith("Q4_K_M") and got[0].size == 450


def test_a_safetensors_repo_offers_the_whole_model_without_the_extras():
    files = [HubFile("config.json", 1), HubFile("model.safetensors", 100), HubFile("pytorch_model.bin", 100),
             HubFile("tokenizer.json", 5), HubFile("onnx/model.onnx", 100), HubFile(".gitattributes", 1)]
    (only,) = choices(files)
    assert sorted(f.path for f in only.files) == ["config.json", "model.safetensors", "tokenizer.json"]


def test_a_url_that_names_a_file_offers_that_file():
    files = [HubFile("m-Q8_0.gguf", 800), HubFile("m-Q4_K_M.gguf", 400)]
    (only,) = choices(files, "m-Q8_0.gguf")
    assert [f.path for f in only.files] == ["m-Q8_0.gguf"]
    assert choices(files, "missing.gguf") == []


def test_quantisation_names_are_read_from_file_names():
    assert [quant_of(n) for n in ("a-Q4_K_M.gguf", "b.q8_0.gguf", "c-IQ3_XS.gguf", "d-bf16.gguf", "e.gguf")] == \
        ["Q4_K_M", "Q8_0", "IQ3_XS", "BF16", ""]
