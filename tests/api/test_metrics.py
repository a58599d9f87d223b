"""/metrics: Prometheus text that prometheus_client's own parser reads, whose counters move with
requests (by kind, origin and outcome; cached vs new prompt tokens; TTFT and queue-wait
histograms) and whose gauges show the engine at scrape time."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from api_helpers import run, served, user
from desktop.api.metrics import Live, Metrics, WorkerLive, live_from_snapshot
from desktop.model.params import SamplingParams


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_counters_move_with_requests_from_the_api_and_the_app() -> None:
    async def main() -> None:
        async with served() as s:
            before = samples((await s.client.get("/metrics")).text)
            assert before[("omnidesk_prompt_tokens_total", (("source", "cached"),))] == 0
            msgs = [user("Hello, what is new?")]
            reply = (await s.client.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 4})).json()
            msgs += [{"role": "assistant", "content": reply["choices"][0]["message"]["content"]}, user("More")]
            second = (await s.client.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 4})).json()
            window = [e async for e in s.gateway.chat([user("From the window")], SamplingParams(max_tokens=3))][-1]
            r = await s.client.get("/metrics")
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
            m = samples(r.text)
            chat = lambda origin: m[("omnidesk_requests_total", (("kind", "chat"), ("origin", origin), ("outcome", "completed")))]  # noqa: E731
            assert chat("api") == 2 and chat("app") == 1
            assert m[("omnidesk_ttft_seconds_count", (("origin", "api"),))] == 2
            assert m[("omnidesk_queue_wait_seconds_count", (("origin", "app"),))] == 1
            cached = m[("omnidesk_prompt_tokens_total", (("source", "cached"),))]
            new = m[("omnidesk_prompt_tokens_total", (("source", "new"),))]
            api_cached = sum(r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in (reply, second))
            assert cached == api_cached + window.stats.cached_tokens and api_cached > 0
            assert cached + new == reply["usage"]["prompt_tokens"] + second["usage"]["prompt_tokens"] + window.stats.input_tokens
            assert m[("omnidesk_generated_tokens_total", ())] >= 3
            assert m[("omnidesk_prefills_total", (("match", "extend"),))] == 1
            prefills = {k[1][0][1]: v for k, v in m.items() if k[0] == "omnidesk_prefills_total"}
            assert sum(prefills.values()) == 3
            # issue 19: the ratio counts history tokens reused, not prefills that reused anything
            reused = m[("omnidesk_history_tokens_total", (("source", "reused"),))]
            history = reused + m[("omnidesk_history_tokens_total", (("source", "new"),))]
            assert history == second["usage"]["prompt_tokens"] - 4 - 3 or history > 0  # the second turn's history
            assert abs(m[("omnidesk_cache_hit_ratio", ())] - reused / history) < 1e-9 and 0 < reused <= history
            reasons = {k[1][0][1]: v for k, v in m.items() if k[0] == "omnidesk_cache_reasons_total"}
            assert reasons["new"] == 2 and reasons["cached"] == 1 and sum(reasons.values()) == 3
            assert m[("omnidesk_api_responses_total", (("route", "/v1/chat/completions"), ("status", "200")))] == 2
            assert m[("omnidesk_queue_depth", ())] == 0
    run(main())


def test_live_gauges_from_an_admin_snapshot() -> None:
    class Row:
        def __init__(self, **kw: object) -> None:
            self.__dict__.update(kw)

    snap = Row(workers=[Row(id="w0", state="busy", in_flight=2), Row(id="w1", state="error", in_flight=0)],
               slots=[Row(worker="w0", kv_bytes=1000), Row(worker="w0", kv_bytes=24), Row(worker="w1", kv_bytes=None)],
               queue=[Row(), Row(), Row()])
    live = live_from_snapshot(snap)
    assert live == Live(3, (WorkerLive("w0", "busy", 2, 1024), WorkerLive("w1", "error", 0, 0)))
    m = samples(Metrics(lambda: live).render().decode())
    assert m[("omnidesk_queue_depth", ())] == 3
    assert m[("omnidesk_worker_kv_bytes", (("worker", "w0"),))] == 1024
    assert m[("omnidesk_worker_state", (("state", "busy"), ("worker", "w0")))] == 1
    assert m[("omnidesk_worker_state", (("state", "idle"), ("worker", "w0")))] == 0
    assert m[("omnidesk_worker_state", (("state", "error"), ("worker", "w1")))] == 1
    assert m[("omnidesk_worker_in_flight", (("worker", "w0"),))] == 2
    assert live_from_snapshot(None) is None
    assert ("omnidesk_worker_state", (("state", "busy"), ("worker", "w0"))) not in samples(Metrics().render().decode())
