"""An API client that sends back the reply it got, word for word, reuses the reply's KV to its
last token (issue 22 §0): the reply's generated ids are its canonical tokens."""

from __future__ import annotations

from api_helpers import MODEL, run, served, user


def test_a_follow_up_resending_the_reply_reuses_all_of_it() -> None:
    async def main() -> None:
        async with served() as s:
            msgs = [{"role": "system", "content": "You are terse."}, user("Tell me about trains, in two paragraphs.")]
            first = (await s.client.post("/v1/chat/completions", json={"model": MODEL, "messages": msgs,
                                                                       "max_tokens": 24, "temperature": 0})).json()
            reply, usage = first["choices"][0]["message"]["content"], first["usage"]
            msgs += [{"role": "assistant", "content": reply}, user("And then?")]
            second = (await s.client.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 3})).json()
            cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
            # all the first turn's prompt and reply but the reply's last id (sampled, never fed to the KV)
            assert cached == usage["prompt_tokens"] + usage["completion_tokens"] - 1, (cached, usage)
    run(main())
