"""What the model manager reads from a model on disk, and the four kinds of bad input it refuses
with a sentence: a folder that is not a model, an unsupported GGUF architecture, a truncated file,
a model that needs custom code."""

from __future__ import annotations

from pathlib import Path

from desktop.models.checks import problem
from desktop.models.facts import Kind, read_folder
from desktop.models.gguf_facts import SUPPORTED, read_gguf
from tests.models.model_files import write_folder, write_gguf


def test_a_gguf_file_gives_its_facts(tmp_path: Path):
    path = write_gguf(tmp_path / "tiny-Q8_0.gguf")
    facts = read_gguf(path)
    assert (facts.kind, facts.name, facts.family, facts.quant) == (Kind.GGUF, "Tiny Llama", "llama", "Q8_0")
    assert facts.params == 64 * 32 + 32 * 32
    assert facts.size_bytes == path.stat().st_size and not facts.vision and facts.problem == ""


def test_a_projector_beside_a_gguf_means_it_sees_images(tmp_path: Path):
    path = write_gguf(tmp_path / "m.gguf")
    assert not read_gguf(path).vision
    write_gguf(tmp_path / "mmproj-m-f16.gguf", arch="clip")
    assert read_gguf(path).vision


def test_without_a_file_type_the_most_used_tensor_type_names_the_quantisation(tmp_path: Path):
    assert read_gguf(write_gguf(tmp_path / "m.gguf", file_type=None)).quant == "F32"


def test_a_truncated_gguf_is_refused_with_a_sentence(tmp_path: Path):
    path = write_gguf(tmp_path / "m.gguf")
    data = path.read_bytes()
    for cut in (len(data) - 100, len(data) - 5000, 200):
        path.write_bytes(data[:cut])
        why = read_gguf(path).problem
        assert "truncated" in why and "m.gguf" in why, why
        assert problem(str(path)) == why


def test_a_gguf_of_an_unsupported_architecture_is_refused(tmp_path: Path):
    path = write_gguf(tmp_path / "w.gguf", arch="whisper")
    why = read_gguf(path).problem
    assert "whisper" in why and "cannot run" in why


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path):
    path = tmp_path / "notes.gguf"
    path.write_text("hello")
    assert "not a GGUF file" in read_gguf(path).problem


def test_the_supported_architectures_are_ones_transformers_loads_from_gguf():
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    known = set(GGUF_SUPPORTED_ARCHITECTURES) | {a.replace("_", "") for a in GGUF_SUPPORTED_ARCHITECTURES}
    assert SUPPORTED <= known, SUPPORTED - known


def test_a_hugging_face_folder_gives_its_facts(tmp_path: Path):
    facts = read_folder(write_folder(tmp_path / "m", vision=True))
    assert (facts.kind, facts.family, facts.params, facts.quant, facts.vision) == (Kind.FOLDER, "llama", 100 * 10 + 100, "F16", True)
    assert facts.problem == "" and facts.size_bytes > 0


def test_a_folder_that_is_not_a_model_is_refused(tmp_path: Path):
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "a.jpg").write_bytes(b"x")
    assert "not a model" in problem(str(tmp_path / "photos"))
    assert "not a model folder" in read_folder(tmp_path / "photos").problem


def test_a_model_that_needs_custom_code_is_refused(tmp_path: Path):
    folder = write_folder(tmp_path / "custom", model_type="mything", extra={"auto_map": {"AutoModel": "x.Y"}})
    why = problem(str(folder))
    assert "custom code" in why and "trust_remote_code" in why


def test_a_truncated_safetensors_file_is_refused(tmp_path: Path):
    folder = write_folder(tmp_path / "m")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-50])
    assert "damaged" in problem(str(folder))


def test_a_folder_without_tokenizer_or_weights_says_which(tmp_path: Path):
    assert "no tokenizer" in problem(str(write_folder(tmp_path / "a", tokenizer=False)))
    folder = write_folder(tmp_path / "b")
    (folder / "model.safetensors").unlink()
    assert "no weights" in problem(str(folder))


def test_the_embedded_model_and_test_models_pass_the_check():
    assert problem("default") == "" and problem("tiny") == ""
