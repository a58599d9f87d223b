"""Typed commands from the gateway to a worker: plain frozen dataclasses of picklable fields, so the
same objects cross a thread queue or a process pipe. Every command that carries a request_id ends
with exactly one Done or ErrorEvent."""

from __future__ import annotations

from dataclasses import dataclass, field

from desktop.model.messages import Message
from desktop.model.params import SamplingParams

@dataclass(frozen=True, slots=True)
class Chat:
    """Stateless turn: the whole message list; the worker finds the slot that holds its prefix.
    `params.max_tokens == 0` only prefills (warms the cache). `origin`: who sent it ("app": the
    window; "api": the local HTTP API), which weighs what its KV is worth keeping; `conversation`:
    the saved conversation it belongs to ("" for none), whose KV it tags. `raw`: a completion
    (/v1/completions): one message whose text is the prompt, tokenised as is (no chat template,
    no generation prompt); its KV is reused by token prefix. `overflow`: what the worker does
    when the conversation and its reply would pass the model's window: "slide" (the oldest
    messages leave the model's view, workers/slide.py) or "error" (the request is refused once
    its prompt alone passes the window); a raw prompt never slides."""

    request_id: str
    messages: tuple[Message, ...]
    params: SamplingParams = field(default_factory=SamplingParams)
    origin: str = "app"
    conversation: str = ""
    raw: bool = False
    overflow: str = "slide"


@dataclass(frozen=True, slots=True)
class CreateSession:
    """Open a stateful session pinned to one slot; an optional system prompt is prefilled."""

    request_id: str
    session_id: str
    system: str | None = None


@dataclass(frozen=True, slots=True)
class AppendInput:
    """Append new messages (the delta) to a session and prefill them.

    `draft`: the messages are provisional (a voice call's partial transcript, prefilled while the
    user still speaks). The session's next AppendInput or Generate(messages=…) replaces them: only
    what differs from the draft's ids is prefilled. A draft with no messages withdraws the draft;
    a Generate without messages makes it final."""

    request_id: str
    session_id: str
    messages: tuple[Message, ...]
    draft: bool = False


@dataclass(frozen=True, slots=True)
class Generate:
    """Generate the assistant's reply in a session from what has been appended so far; `messages`
    (the user's final words) are appended first, replacing a draft, in the same command: a voice
    turn needs no round trip between its words and its reply."""

    request_id: str
    session_id: str
    params: SamplingParams = field(default_factory=SamplingParams)
    messages: tuple[Message, ...] = ()


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop (cancel) a running or queued request within one decode step; its KV is kept."""

    request_id: str


@dataclass(frozen=True, slots=True)
class TruncateReply:
    """The session's last message, the assistant's reply, becomes `text`: what the user actually
    heard of it when a barge-in cut it short ("" drops the reply). The session must be idle (stop
    the reply and wait for its end first); the KV keeps what still agrees with the new text."""

    request_id: str
    session_id: str
    text: str


@dataclass(frozen=True, slots=True)
class EndSession:
    """Close a session and free its KV."""

    request_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Ask the worker loop to exit after failing what is still in flight."""


@dataclass(frozen=True, slots=True)
class Reset:
    """The host gave up on what the worker was doing (it was declared hung): fail every request
    and end every session, so that the worker comes back empty if it ever resumes."""


Command = Chat | CreateSession | AppendInput | Generate | Stop | TruncateReply | EndSession | Shutdown | Reset
