"""Smoke test of bench/restart.py on the tiny model: it runs end to end, measures what it claims
(RAM turns hit the slot, re-prefills start from nothing, restores come from disk), and says why
where the build has no disk tier instead of crashing."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "restart.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_restart", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_restart_bench_runs_on_the_tiny_model(tmp_path, capsys):
    out = load_bench().main(["--model", "tiny", "--sizes", "300,900", "--repeats", "2", "--threads", "1",
                             "--kv-dir", str(tmp_path)])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("{")  # the last line is the JSON
    assert set(out["ttft_ram_ms"]) == {"300", "900"} and out["cores"] >= 1 and out["cpu"]
    for case in out["cases"]:
        assert case["history_tokens"] >= case["size"]
        assert [r["kind"] for r in case["ram"]] == ["extend", "extend"]  # the history was in the slot
        assert all(r["cached"] >= case["size"] for r in case["ram"])
        assert [r["kind"] for r in case["prefill"]] == ["miss", "miss"]  # cold: everything read again
        assert all(r["cached"] == 0 and r["input"] > case["history_tokens"] for r in case["prefill"])
        assert case["ttft_ram_ms"] > 0 and case["ttft_prefill_ms"] > 0
        if case["note"] is None:  # the disk tier: every restart restored the history from its snapshot
            assert [r["kind"] for r in case["restore"]] == ["disk", "disk"]
            assert all(r["cached"] >= case["ram"][-1]["cached"] for r in case["restore"])  # all the RAM slot had
            assert case["snapshot_bytes_per_token"] > 0 and case["ttft_restore_ms"] > 0
    if not out["disk_tier"]:
        assert out["restore"] is None and "disk" in out["note"]
    assert set(out["targets"]) == {"restore_speedup_4k", "restore_over_ram_4k"}
