"""One streamed reply read into what the host sends on: its lines parsed, the server's accounting
folded in, its text taken within the request's budget. It ends on [DONE], a finish reason or a full
budget; anything else (a stall, an error, a line of the wrong kind, a cut stream) raises."""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator, Callable

from desktop.workers.remote.outcome import Accounting, Budget, Malformed, Refused, Stalled
from desktop.workers.remote.wire import parse_line

SLACK = 64  # chunks without text a reply may send beyond its tokens (its role, finish and usage: 3)


async def read_reply(lines: AsyncIterator[str], acc: Accounting, budget: Budget, stall_s: tuple[float, float],
                     t0: float, on_prefill: Callable[[], None], on_text: Callable[[str], None]) -> None:
    """Read `lines` to the reply's end: `on_prefill()` once the server has said what it read of the
    prompt (llama.cpp: with the first token), `on_text(text)` for each piece of text that fits the
    budget. A server that goes on past the budget (its text, or max_tokens + SLACK chunks in all)
    is not read further (finish "length").
    Raises Stalled when no line comes within `stall_s` (before the first line, then between
    lines), Refused for an error the server sends, Malformed for a reply of the wrong kind."""
    loop, window, announced, ended = asyncio.get_running_loop(), stall_s[0], False, False
    try:
        async with asyncio.timeout_at(loop.time() + window) as deadline:
            async for line in lines:
                piece = parse_line(line)
                if piece is None:  # a comment or blank line is no sign of progress (a keep-alive flood stalls)
                    continue
                window = stall_s[1]
                deadline.reschedule(loop.time() + window)
                if piece.bad:
                    raise Malformed(piece.bad)
                if piece.error:
                    raise Refused(500, piece.error)
                if piece.done:
                    ended = True
                    break
                if (piece.delta and budget.full) or acc.pieces >= budget.tokens + SLACK:  # more than was asked for
                    acc.finish, ended = "length", True
                    break
                acc.take(piece, time.perf_counter() - t0)
                if not announced and acc.prompt is not None and not budget.pieces:
                    announced = True
                    on_prefill()
                if piece.delta and (text := budget.take(piece.delta)):
                    on_text(text)
                ended = ended or bool(acc.finish)  # its usage may still follow: read on to [DONE]
    except TimeoutError:
        raise Stalled(window, first=not acc.pieces) from None
    if budget.used >= budget.chars:  # cut to fit
        acc.finish = "length"
    if not ended:
        raise Malformed("the reply ended before the server said it was complete" if acc.pieces
                        else "it sent an empty reply")
