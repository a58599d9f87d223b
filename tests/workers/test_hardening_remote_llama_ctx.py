"""Issue 19, polish of the remote items: the README's llama.cpp test server ran with a 1,024-token
context; by default it now gives every slot the model's own context (8,192 for the embedded model)."""

from __future__ import annotations

import httpx
import pytest

from desktop.workers.remote.llama_server import LlamaServer

pytestmark = pytest.mark.hardening
pytest.importorskip("xllamacpp")


def test_the_test_server_serves_the_models_whole_context_in_every_slot():
    with LlamaServer(slots=2) as server:
        props = httpx.get(server.url + "/props", timeout=30).json()
    assert props["total_slots"] == 2
    assert props["default_generation_settings"]["n_ctx"] == 8192  # SmolLM2's context, not 1,024
