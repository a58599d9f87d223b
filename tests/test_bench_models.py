"""bench/models.py's readiness part: the last line is JSON with the machine and the choices."""

from __future__ import annotations

import json
import sys

from bench import models


def test_the_last_line_is_json_with_the_machine_and_the_choices(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["models", "--no-gpu", "--ready", "0"])  # no model starts here
    models.main()
    lines = capsys.readouterr().out.strip().splitlines()
    out = json.loads(lines[-1])
    assert out["machine"]["cores"] >= 1 and out["facts"]["gpus"] == []
    ready = out["readiness"]
    assert ready["device"]["value"] == "cpu" and ready["device"]["reason"]
    assert set(ready) >= {"device", "dtype", "threads", "kv_budget_mb", "slots", "embedded_fits", "largest_model_b"}
    assert any(line.strip().startswith("device:") for line in lines[:-1])  # the table a person reads
