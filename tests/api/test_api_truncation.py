"""Issue 22 §2 through the API: a conversation longer than the model's window slides (the oldest
messages leave the model's view) unless the request says `"truncation": "disabled"` (OpenAI
Responses' word), which gets context_length_exceeded instead."""

from __future__ import annotations

from api_helpers import run, served, user

CHAT = "/v1/chat/completions"


def long_conversation(context: int) -> list[dict]:
    msgs = [{"role": "system", "content": "Be brief."}]
    for n in range(context // 12):
        msgs += [user(f"Question {n}: what about the quick brown fox?"), {"role": "assistant", "content": "It jumps."}]
    return msgs + [user("And the lazy dog?")]


def test_the_api_slides_unless_truncation_is_disabled() -> None:
    async def main() -> None:
        async with served() as s:
            msgs = long_conversation(s.gateway.context_length())
            ok = await s.client.post(CHAT, json={"messages": msgs, "max_tokens": 4})
            assert ok.status_code == 200, ok.text
            body = ok.json()
            assert body["choices"][0]["message"]["content"] is not None
            assert body["usage"]["prompt_tokens"] < s.gateway.context_length()
            refused = await s.client.post(CHAT, json={"messages": msgs, "max_tokens": 4, "truncation": "disabled"})
            assert refused.status_code == 400 and refused.json()["error"]["code"] == "context_length_exceeded", refused.text
            bad = await s.client.post(CHAT, json={"messages": msgs, "truncation": "sometimes"})
            assert bad.status_code == 400 and bad.json()["error"]["param"] == "truncation"
    run(main())
