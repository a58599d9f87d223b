"""Shared pytest setup: offline, headless, one torch thread, and the `real_model` marker.

`real_model` tests load the embedded SmolLM2 default (run only them with `-m real_model`). One
torch thread: the tiny model is dispatch-bound and 2 OpenMP threads under load are ~10× slower."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "real_model: loads the real embedded default model (slow; converts once per machine)"
    )
