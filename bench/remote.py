"""A two-turn conversation through a remote llama.cpp worker (RemoteHost behind the real gateway):
time to first token of each turn, and the prompt tokens the server itself says it reused on the
second turn (remote_cached_tokens_turn2; target > 0). Starts its own llama.cpp server on 127.0.0.1
(xllamacpp, the embedded GGUF) unless given --url. The last line is JSON.

    PYTHONPATH=. python bench/remote.py [--url http://127.0.0.1:8080] [--model NAME] [--api-key KEY]

bench/api.py calls measure_remote(url) for the same numbers."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from desktop.gateway.gateway import Gateway  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.protocol import Done, ErrorEvent  # noqa: E402
from desktop.workers.remote.host import RemoteHost  # noqa: E402
from desktop.workers.remote.llama_server import LlamaServer  # noqa: E402
from desktop.workers.remote.spec import RemoteSpec  # noqa: E402

SYSTEM = ("You are a helpful assistant who answers in plain words. Keep answers short, accurate and friendly; "
          "when you are unsure, say so.")
TURNS = ("What is a river delta?", "And how does one form over time?")
TOKENS = 16


async def _conversation(spec: RemoteSpec) -> dict:
    gw = Gateway([RemoteHost("remote0", spec)])
    await gw.start()
    try:
        if not await gw.wait_ready(60):
            raise RuntimeError(f"the server at {spec.url} does not answer")
        messages = [{"role": "system", "content": SYSTEM}]
        turns = []
        for question in TURNS:
            messages.append({"role": "user", "content": question})
            end = None
            async for event in gw.chat(messages, SamplingParams(max_tokens=TOKENS, temperature=0.0)):
                end = event
            if isinstance(end, ErrorEvent):
                raise RuntimeError(end.message)
            assert isinstance(end, Done)
            turns.append(end.stats)
            messages.append({"role": "assistant", "content": end.text})
        return {
            "remote_cached_tokens_turn2": turns[1].cached_tokens,
            "remote_prompt_tokens_turn2": turns[1].input_tokens,
            "remote_cached_tokens_turn1": turns[0].cached_tokens,
            "remote_ttft_ms_turn1": round(turns[0].ttft_ms, 1),
            "remote_ttft_ms_turn2": round(turns[1].ttft_ms, 1),
            "remote_prefill_ms_turn1": round(turns[0].prefill_ms, 1),
            "remote_prefill_ms_turn2": round(turns[1].prefill_ms, 1),
            "remote_turn2_kind": turns[1].kind,
        }
    finally:
        await gw.close()


def measure_remote(url: str | None, *, model: str = "", api_key: str = "") -> dict:
    """The two-turn numbers against the server at `url`; None: a llama.cpp server started here on
    127.0.0.1 (one thread, 2 slots of 1,024 tokens) and stopped afterwards. Blocking; call it from
    outside any running event loop."""
    server = None
    if url is None:
        server = LlamaServer(ctx=1024, slots=2, threads=1)
        url = server.start()
    try:
        result = asyncio.run(_conversation(RemoteSpec(url, model, api_key)))
    finally:
        if server is not None:
            server.kill()
    return {"remote_url": url, "remote_server": "xllamacpp (started here)" if server else "given", **result}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="an OpenAI-compatible server (default: start llama.cpp here)")
    ap.add_argument("--model", default="")
    ap.add_argument("--api-key", default="")
    a = ap.parse_args()
    result = measure_remote(a.url, model=a.model, api_key=a.api_key)
    for key, value in result.items():
        print(f"{key:28s} {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
