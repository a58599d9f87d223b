"""Fixtures for worker tests: the tiny model and the uncached oracle."""

from __future__ import annotations

import pytest
from worker_helpers import Oracle

from desktop.model.loader import LoadedModel, ModelSpec, load_model


@pytest.fixture(scope="session")
def tiny_lm() -> LoadedModel:
    return load_model(ModelSpec("tiny"))


@pytest.fixture(scope="session")
def oracle(tiny_lm) -> Oracle:
    return Oracle(tiny_lm)
