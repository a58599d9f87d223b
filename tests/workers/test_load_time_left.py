"""The time left in a model load (workers/load_time_left.py) and the weight-loading progress that
feeds it (model/weight_progress.py, through transformers' tqdm hook)."""

from __future__ import annotations

import pytest

from desktop.model import weight_progress
from desktop.model.weight_progress import weights_progress
from desktop.workers.load_time_left import TimeLeft, left_text


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_time_left_from_the_stage_rate():
    clock = Clock()
    left = TimeLeft(clock)
    assert left("Loading model…", 0.0) is None  # the stage starts
    clock.t += 0.5
    assert left("Loading model…", 0.1) is None  # too young to say
    clock.t += 3.5
    assert left("Loading model…", 0.4) == pytest.approx(6.0)  # 4 s for 40 %: 6 s for the rest
    clock.t += 1.0
    assert left("Another stage…", 0.5) is None  # a new stage starts the clock again
    assert left("Another stage…", None) is None


def test_left_text_rounds():
    assert left_text(11.6) == "about 12 s left" and left_text(0.2) == "about 1 s left"
    assert left_text(150) == "about 2 min left"


def test_weight_loading_reports_its_fraction(monkeypatch):
    """transformers' "Loading weights" loop, through its own hook: fractions, items unchanged."""
    from transformers.utils import logging as hf_logging

    monkeypatch.setattr(weight_progress, "EVERY_S", 0.0)
    reports: list = []
    before = hf_logging.set_tqdm_hook(None)
    hf_logging.set_tqdm_hook(before)
    with weights_progress(lambda stage, f: reports.append((stage, f))):
        items = dict.fromkeys(range(10), "w").items()
        got = list(hf_logging.tqdm(items, desc="Loading weights"))
        other = hf_logging.tqdm([1, 2], desc="Something else")
        assert list(other) == [1, 2]
    assert got == list(items)
    assert reports[0] == ("Loading model…", 0.0) and reports[-1] == ("Loading model…", 0.9)
    assert len(reports) == 10 and all(s == "Loading model…" for s, _ in reports)
    assert hf_logging.set_tqdm_hook(before) is before  # the previous hook is back


def test_a_real_folder_load_reports_weight_progress(tmp_path, monkeypatch):
    from desktop.model import loader
    from desktop.model.loader import ModelSpec
    from desktop.model.tiny import tiny_model, tiny_tokenizer

    tiny_model().save_pretrained(tmp_path)
    tiny_tokenizer().save_pretrained(tmp_path)
    monkeypatch.setattr(weight_progress, "EVERY_S", 0.0)
    stages: list = []
    loader.load_model(ModelSpec(str(tmp_path)), lambda s, f: stages.append((s, f)))
    fractions = [f for s, f in stages if s == "Loading model…" and f is not None]
    assert fractions and fractions == sorted(fractions) and max(fractions) < 1.0
