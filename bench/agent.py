"""An agent through the local API: a 10-round tool loop with the official openai client on the
embedded model (or `--model tiny`), as an agent runs one: each round the model must call a tool
(tool_choice "required": the call is constrained to the function's schema), the tool answers with
about 200 tokens of text, and the whole conversation goes back with the result.

The system prompt is an agent's long instruction block (--system-words, about 1,800 tokens by
default, as coding and research agents send): with tool results of 200 tokens the cached share of a
round's prompt can only reach 0.9 once the history is ten times a result, so a short system prompt
would measure arithmetic, not the cache; `new_tokens_max` says what each round prefilled anyway.

Measured (the last line is JSON):
- cached_fraction_min: the lowest share of a round's prompt served from the KV, from round 2 on
  (usage.prompt_tokens_details.cached_tokens ÷ prompt_tokens; target ≥ 0.9);
- ttft_round10_over_round2: the worker's time to first token of the last round over round 2's
  (target ≤ 1.3: a round costs its new tokens, not its history);
- valid_tool_calls: rounds whose reply was a call whose arguments match the schema (of 10);
- grammar_decode_ratio: decode tokens/s with a grammar (a JSON schema that asks for a long reply)
  over without (the same number of tokens, end of turn ignored), alternated in the same run,
  the median of each (target ≥ 0.9)."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine  # noqa: E402

TOOL = {"type": "function", "function": {
    "name": "read_page", "description": "Read one page of the user's notebook.",
    "parameters": {"type": "object", "properties": {"page": {"type": "integer", "minimum": 1, "maximum": 99}},
                   "required": ["page"], "additionalProperties": False}}}
SYSTEM = "You are a research agent. Read the notebook page by page with read_page, then summarise."
LONG = {"type": "object", "properties": {"notes": {"type": "array", "minItems": 12, "maxItems": 12, "items": {
    "type": "string", "minLength": 24, "maxLength": 40}}}, "required": ["notes"], "additionalProperties": False}
WORDS = ("tea grows on steep hills where mist keeps the leaves tender and pickers climb at dawn "
         "to take the two top leaves and a bud before the sun turns them bitter").split()


def system_prompt(words: int) -> str:
    """SYSTEM, then numbered working rules up to about `words` words."""
    rules, n = [SYSTEM], 0
    while sum(len(r.split()) for r in rules) < words:
        n += 1
        rules.append(f"Rule {n}: " + " ".join(WORDS[(n * 3 + i) % len(WORDS)] for i in range(12)) + ".")
    return "\n".join(rules)


def page_text(page: int, words: int = 150) -> str:
    """A tool result of about 200 tokens, different for each page."""
    return f"Page {page}: " + " ".join(WORDS[(page * 7 + i) % len(WORDS)] for i in range(words)) + "."


def valid(args: str) -> bool:
    try:
        obj = json.loads(args)
    except ValueError:
        return False
    return (isinstance(obj, dict) and set(obj) == {"page"} and isinstance(obj["page"], int)
            and not isinstance(obj["page"], bool) and 1 <= obj["page"] <= 99)


class StatsGateway:
    """The gateway as it is, keeping each finished request's TokenStats (ttft_ms, decode_ms)."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self.stats: list[Any] = []

    def chat(self, *args: Any, **kw: Any) -> Any:
        return Kept(self.gateway.chat(*args, **kw), self.stats)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gateway, name)


class Kept:
    def __init__(self, stream: Any, into: list[Any]) -> None:
        self.stream, self.into, self.request_id = stream, into, stream.request_id

    def __aiter__(self) -> "Kept":
        return self

    async def __anext__(self) -> Any:
        from desktop.protocol import Done

        event = await self.stream.__anext__()
        if isinstance(event, Done):
            self.into.append(event.stats)
        return event

    async def aclose(self) -> None:
        await self.stream.aclose()


async def agent(url: str, model: str, rounds: int, kept: list[Any], system: str) -> list[dict[str, Any]]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0, timeout=600)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                      {"role": "user", "content": "Read my notebook and tell me what it says about tea."}]
    rows = []
    try:
        for n in range(1, rounds + 1):
            t = time.monotonic()
            reply = await client.chat.completions.create(model=model, messages=messages, tools=[TOOL],
                                                         tool_choice="required", max_tokens=48, temperature=0)
            wall = time.monotonic() - t
            choice, usage = reply.choices[0], reply.usage
            calls = choice.message.tool_calls or []
            stats = kept[-1]
            rows.append(row := {"round": n, "prompt": usage.prompt_tokens, "cached": usage.prompt_tokens_details.cached_tokens,
                         "ttft_ms": round(stats.ttft_ms, 1), "wall_s": round(wall, 3), "finish": choice.finish_reason,
                         "valid": len(calls) == 1 and calls[0].function.name == "read_page" and valid(calls[0].function.arguments)})
            print(json.dumps(row), flush=True)
            if not calls:
                messages.append({"role": "assistant", "content": choice.message.content or ""})
                messages.append({"role": "user", "content": "Call read_page."})
                continue
            messages.append(choice.message.model_dump(exclude_none=True))
            for call in calls:
                page = json.loads(call.function.arguments).get("page", n) if valid(call.function.arguments) else n
                messages.append({"role": "tool", "tool_call_id": call.id, "content": page_text(int(page) + n)})
    finally:
        await client.close()
    return rows


async def decode_ratio(gateway: Any, pairs: int) -> dict[str, Any]:
    """Decode tokens/s with a grammar over without, alternated, on a fresh short conversation each."""
    from desktop.model.grammar import json_grammar
    from desktop.model.params import SamplingParams
    from desktop.protocol import Done, ErrorEvent

    async def run(i: int, params: SamplingParams) -> Any:
        msgs = [{"role": "user", "content": f"Write twelve short notes about tea, set {i}, as JSON."}]
        async for event in gateway.chat(msgs, params, origin="api"):
            if isinstance(event, Done):
                return event.stats
            if isinstance(event, ErrorEvent):
                raise RuntimeError(f"{event.code}: {event.message}")
        raise RuntimeError("no Done")

    grammar = json_grammar(LONG)
    with_g, without = [], []
    for i in range(pairs):
        g = await run(i, SamplingParams(max_tokens=400, grammar=grammar))
        free = await run(i, SamplingParams(max_tokens=g.generated_tokens, ignore_eos=True))
        with_g.append((g.generated_tokens - 1) / g.decode_ms * 1000)
        without.append((free.generated_tokens - 1) / free.decode_ms * 1000)
    return {"grammar_tok_s": round(statistics.median(with_g), 1), "free_tok_s": round(statistics.median(without), 1),
            "grammar_decode_ratio": round(statistics.median(with_g) / statistics.median(without), 3),
            "grammar_tokens": g.generated_tokens}


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    from api import make_gateway
    from desktop.api.app import Engine, make_app
    from desktop.api.server import ApiServer, ApiState

    gw = make_gateway(args.model)
    await gw.start()
    if not await gw.wait_ready(900):
        raise SystemExit("The model did not load.")
    kept = StatsGateway(gw)
    server = ApiServer(lambda key, local_only: make_app(lambda: Engine(kept, args.model), key=key, local_only=local_only))
    status = await server.start("127.0.0.1", 0)
    assert status.state is ApiState.LISTENING, status
    try:
        rows = await agent(status.url, args.model, args.rounds, kept.stats, system_prompt(args.system_words))
        ratio = await decode_ratio(gw, args.pairs)
    finally:
        await server.stop()
        await gw.close()
    later = rows[1:]
    return {"rounds": rows, **ratio,
            "cached_fraction_min": round(min(r["cached"] / r["prompt"] for r in later), 3) if later else None,
            "ttft_round10_over_round2": round(rows[-1]["ttft_ms"] / rows[1]["ttft_ms"], 3) if len(rows) > 1 else None,
            "new_tokens_max": max((r["prompt"] - r["cached"] for r in later), default=None),
            "valid_tool_calls": sum(r["valid"] for r in rows), "of": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help='"default" (the embedded model) or "tiny"')
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--system-words", type=int, default=1300, help="the system prompt's length in words")
    parser.add_argument("--pairs", type=int, default=3, help="grammar / no grammar decode pairs")
    args = parser.parse_args()
    out = asyncio.run(bench(args))
    summary = {k: v for k, v in out.items() if k != "rounds"}
    print(json.dumps({**summary, "model": args.model, **machine()}))


if __name__ == "__main__":
    main()
