"""bench/ready_figures.py (bench/models.py --ready): ready_s_default: the probe's stamps become seconds from the process start,
and the figure is the median time to the first token (the probe itself is faked here)."""

from __future__ import annotations

import json
import subprocess
import types

import pytest

from bench import ready_figures as models


def fake_probe(starts: list[float]):
    """subprocess.run returning the probe's JSON line, its stamps `start` seconds after t0."""
    def run(cmd, **kwargs):
        t0 = float(cmd[-1])
        s = starts.pop(0)
        stages = [["Starting…", t0 + 0.2], ["Starting…", t0 + s - 1], ["Loading tokenizer…", t0 + s - 0.5],
                  ["ready", t0 + s], ["first token", t0 + s + 0.3]]
        line = {"t0": t0, "started": t0 + 0.05, "imported": t0 + 0.1, "asked": t0 + s + 0.01, "stages": stages, "error": ""}
        return types.SimpleNamespace(returncode=0, stdout="noise\n" + json.dumps(line) + "\n", stderr="")
    return run


def test_median_of_fresh_starts_to_the_first_token(monkeypatch):
    monkeypatch.setattr(subprocess, "run", fake_probe([9.0, 2.0, 5.0, 3.0]))  # the first one only warms up
    out = models.ready_s_default(runs=3)
    assert out["ready_s_default"] == pytest.approx(3.3) and out["ready_s_to_idle"] == pytest.approx(3.0)
    assert out["ttft_s_first_reply"] == pytest.approx(0.29)
    stages = out["ready_runs"][0]["stages_s"]
    assert list(stages) == ["Starting…", "Starting… (again)", "Loading tokenizer…", "ready", "first token"]


def test_a_failed_worker_is_an_error_not_a_figure(monkeypatch):
    def run(cmd, **kwargs):
        line = {"t0": 0, "started": 0, "imported": 0, "asked": 0, "stages": [], "error": "No model"}
        return types.SimpleNamespace(returncode=0, stdout=json.dumps(line), stderr="")
    monkeypatch.setattr(subprocess, "run", run)
    with pytest.raises(RuntimeError, match="No model"):
        models.ready_start()


def test_first_start_runs_in_an_empty_cache_of_its_own(monkeypatch):
    caches = []
    fake = fake_probe([40.0, 2.0])

    def run(cmd, **kwargs):
        caches.append(kwargs["env"].get("OMNIDESK_CACHE_DIR"))
        return fake(cmd, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    out = models.ready_first_s()
    assert out["ready_s_first_start"] == pytest.approx(40.3) and out["ready_s_after_first"] == pytest.approx(2.3)
    assert caches[0] and caches[0] == caches[1]  # the later start reads what the first one converted
