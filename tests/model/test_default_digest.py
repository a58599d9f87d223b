"""The embedded GGUF's digest (it names the converted folder) is hashed once per machine and read
back from the models folder on later starts; a changed file is hashed again."""

from __future__ import annotations

import hashlib
import os

import pytest

from desktop.model import default_model


@pytest.fixture
def gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIDESK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "models").mkdir(parents=True)
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + b"x" * 1000)
    default_model._sha256.cache_clear()
    yield path
    default_model._sha256.cache_clear()


def digest(path) -> str:
    default_model._sha256.cache_clear()  # a new process
    return default_model._gguf_digest(path)


def test_hashed_once_then_read_back(gguf, monkeypatch):
    first = digest(gguf)
    assert first == hashlib.sha256(gguf.read_bytes()).hexdigest()
    monkeypatch.setattr(hashlib, "file_digest", lambda *a: pytest.fail("hashed again"))
    assert digest(gguf) == first


def test_a_changed_file_is_hashed_again(gguf):
    first = digest(gguf)
    gguf.write_bytes(b"GGUF" + b"y" * 1000)
    os.utime(gguf, ns=(1, 1))
    assert digest(gguf) != first == hashlib.sha256(b"GGUF" + b"x" * 1000).hexdigest()


def test_a_damaged_memo_is_rewritten(gguf):
    (gguf.parent / "cache" / "models" / default_model.DIGESTS).write_text("{not json")
    assert digest(gguf) == hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert digest(gguf) == hashlib.sha256(gguf.read_bytes()).hexdigest()
