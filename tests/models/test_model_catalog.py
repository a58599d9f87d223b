"""The catalog finds the models on disk in every place (the embedded one first, the HF cache, the
models folder, LM Studio, Ollama), each once, and the fit column follows the readiness choices."""

from __future__ import annotations

import json
from pathlib import Path

from desktop.model.hardware import GIB, Gpu, Machine
from desktop.models.catalog import Catalog
from desktop.models.facts import Kind, ModelFacts
from desktop.models.fit import fit, room
from desktop.models.places import Places
from desktop.workers.readiness import decide
from tests.models.model_files import write_folder, write_gguf


def _hf_cache(root: Path) -> Path:
    snap = root / "models--org--tiny" / "snapshots" / "abc123"
    write_folder(snap)
    (root / "models--org--tiny" / "refs").mkdir(parents=True)
    (root / "models--org--tiny" / "refs" / "main").write_text("abc123")
    return root


def _ollama(root: Path, blob_src: Path) -> Path:
    digest = "sha256:" + "ab" * 32
    (root / "blobs").mkdir(parents=True)
    (root / "blobs" / digest.replace(":", "-")).write_bytes(blob_src.read_bytes())
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / "tinyllama" / "latest"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": digest},
                                               {"mediaType": "application/vnd.ollama.image.template", "digest": "x"}]}))
    return root


def test_every_place_is_scanned_and_each_model_listed_once(tmp_path: Path):
    embedded = write_gguf(tmp_path / "pkg" / "SmolLM2.gguf")
    folder = tmp_path / "mine"
    write_gguf(folder / "a" / "a-Q4_K_M.gguf", name="A")
    write_gguf(folder / "a" / "mmproj-a.gguf", arch="clip")  # a projector, not a model
    write_folder(folder / "b")
    (folder / "b-link.gguf").symlink_to(folder / "a" / "a-Q4_K_M.gguf")  # the same file twice
    lms = write_gguf(tmp_path / "home" / ".lmstudio" / "models" / "pub" / "repo" / "c-Q8_0.gguf", name="C")
    places = Places(hf_cache=_hf_cache(tmp_path / "hub"), models_folder=folder,
                    lm_studio=(lms.parents[2], tmp_path / "nowhere"), ollama=_ollama(tmp_path / "ollama", lms))
    rows = Catalog(lambda: places, lambda: embedded).scan()
    where = [(r.where, r.name, r.kind) for r in rows]
    assert where[0] == ("Embedded", "SmolLM2 135M (embedded)", Kind.EMBEDDED) and rows[0].source == "default"
    assert ("Models folder", "A", Kind.GGUF) in where and ("Models folder", "b", Kind.FOLDER) in where
    assert ("Hugging Face cache", "org/tiny", Kind.FOLDER) in where
    assert ("LM Studio", "C", Kind.GGUF) in where
    assert ("Ollama", "tinyllama:latest", Kind.GGUF) in where  # a blob without a .gguf suffix
    assert len(rows) == 6, where  # no projector, no symlinked double
    assert all(not r.problem for r in rows), [r.problem for r in rows]


def test_a_missing_place_is_no_error_and_no_embedded_model_is_fine(tmp_path: Path):
    places = Places(hf_cache=tmp_path / "no", models_folder=tmp_path / "no2", lm_studio=(tmp_path / "no3",),
                    ollama=tmp_path / "no4")
    assert Catalog(lambda: places, lambda: None).scan() == []


def test_facts_are_read_again_only_when_the_file_changed(tmp_path: Path, monkeypatch):
    path = write_gguf(tmp_path / "m" / "x.gguf")
    catalog = Catalog(lambda: Places(models_folder=tmp_path / "m"), lambda: None)
    calls = []
    import desktop.models.catalog as cat

    real = cat.read_gguf
    monkeypatch.setattr(cat, "read_gguf", lambda p: calls.append(p) or real(p))
    catalog.scan()
    catalog.scan()
    assert len(calls) == 1
    write_gguf(path, rows=128)
    assert catalog.scan()[0].params == 128 * 32 + 32 * 32 and len(calls) == 2


def _machine(ram_gb: float, gpu_gb: float = 0) -> Machine:
    gpus = (Gpu(0, "GPU", int(gpu_gb * GIB), (8, 9)),) if gpu_gb else ()
    return Machine(physical_cores=8, logical_cores=16, ram_total=int(ram_gb * GIB), ram_available=int(ram_gb * GIB),
                   disk_free=100 * GIB, gpus=gpus)


def test_a_model_fits_where_the_readiness_check_leaves_room_for_it():
    small = ModelFacts("a.gguf", Kind.GGUF, "a", size_bytes=1 * GIB)
    big = ModelFacts("b.gguf", Kind.GGUF, "b", size_bytes=20 * GIB)
    laptop, gpu = decide(_machine(16)), decide(_machine(16, gpu_gb=48))
    assert fit(small, laptop).fits and not fit(big, laptop).fits
    assert fit(big, gpu).fits and "GPU" in fit(big, gpu).reason
    assert "would not fit" in fit(big, laptop).reason
    folder = ModelFacts("f", Kind.FOLDER, "f", params=7_000_000_000)
    assert fit(folder, laptop).needs == 7_000_000_000 * (2 if laptop.dtype.value == "bfloat16" else 4)
    assert room(laptop) > 0 and room(gpu) > room(laptop)
    unknown = ModelFacts("u", Kind.FOLDER, "u")
    assert fit(unknown, laptop).fits and "not known" in fit(unknown, laptop).reason


def test_the_embedded_model_needs_its_parameters_in_the_chosen_dtype_not_its_file_size():
    """The torch runner holds the embedded model unpacked (515 MB in float32 for a 98 MB file)."""
    embedded = ModelFacts("default", Kind.EMBEDDED, "SmolLM2", params=134_515_008, size_bytes=98 * 1024**2)
    laptop = decide(_machine(16))
    need = fit(embedded, laptop)
    assert need.needs == 134_515_008 * (2 if laptop.dtype.value == "bfloat16" else 4)
    assert laptop.dtype.value in need.reason and "file size" not in need.reason
