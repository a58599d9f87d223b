"""The chat's tool rounds (desktop/chat/tool_rounds.py) by conversation, drawn: each call shows as
a card (ToolCard) under the reply that made it, asks for approval there, and follows the call to
its result. Approval waits for the user's click, also while another conversation is shown (its
cards come back with it); Stop denies a call still waiting. "Always" holds for this run of the app."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from PySide6.QtWidgets import QToolButton

from desktop.chat.conversations import Conversation, ConversationStore
from desktop.chat.tool_rounds import DENY, MAX_ROUNDS, StartReply, ToolCallInfo, ToolRounds
from desktop.ui.chat.message_view import MessageView


class ToolTurns:
    def __init__(self, toolbox: Any, store: ConversationStore, view: MessageView, *,
                 shown: Callable[[], Conversation], enabled: Callable[[], bool],
                 say: Callable[[str], None] = lambda _text: None) -> None:
        self.toolbox, self.store, self.view, self.shown, self.enabled = toolbox, store, view, shown, enabled
        self.say = say  # the status bar
        self.always: set[str] = set()  # tools the user always allows (this run)
        self._rounds: dict[str, ToolRounds] = {}
        self._pending: dict[str, list[ToolCallInfo]] = {}  # this round's calls, not yet in the conversation
        self._asks: dict[str, asyncio.Future] = {}  # call id → the user's choice
        self._cards: dict[str, Any] = {}  # call id → its card in the view (the shown conversation's)

    def specs(self) -> list[dict[str, Any]]:
        """The tools a new turn offers (none when the switch is off or no server is ready)."""
        if self.toolbox is None or not self.enabled():
            return []
        return self.toolbox.specs()

    def begin(self, conv: Conversation, start: StartReply) -> ToolRounds:
        rounds = ToolRounds(start, self.store, conv, self.toolbox, lambda info: self._approve(info),
                            always=self.always)
        rounds.listeners.append(lambda r, what, x: self._on(conv, what, x))
        self._rounds[conv.id] = rounds
        self._pending[conv.id] = []
        return rounds

    def end(self, conv_id: str) -> None:
        self._rounds.pop(conv_id, None)
        for info in self._pending.pop(conv_id, []):
            self._cards.pop(info.id, None)

    def running(self, conv_id: str) -> bool:
        return conv_id in self._rounds

    def stop(self, conv_id: str) -> None:
        rounds = self._rounds.get(conv_id)
        if rounds is not None:
            rounds.stop()
        for info in self._pending.get(conv_id, []):
            ask = self._asks.pop(info.id, None)
            if ask is not None and not ask.done():
                ask.set_result(DENY)

    def draw_pending(self, conv: Conversation) -> None:
        """The shown conversation was drawn again: its calls not yet saved get their cards back."""
        self._cards = {}
        for info in self._pending.get(conv.id, []):
            self._draw(info)

    # ------------------------------------------------------------------ internals

    async def _approve(self, info: ToolCallInfo) -> str:
        ask = self._asks[info.id] = asyncio.get_running_loop().create_future()
        card = self._cards.get(info.id)
        if card is not None:
            card.show_call(info.name, info.arguments, info.state)  # now with its buttons
        try:
            return await ask
        finally:
            self._asks.pop(info.id, None)

    def _on(self, conv: Conversation, what: str, payload: Any) -> None:
        if what == "reply":  # a new round: the last round's calls are in the conversation now
            for info in self._pending.get(conv.id, []):
                self._cards.pop(info.id, None)
            self._pending[conv.id] = []
            return
        if what == "limit":
            self.say(f"The assistant called tools {MAX_ROUNDS} times in a row; the turn stops here. "
                     "Send a message to let it go on.")
        if what != "call":
            return
        pending = self._pending.setdefault(conv.id, [])
        if payload not in pending:
            pending.append(payload)
        if conv is self.shown():
            self._draw(payload)

    def _draw(self, info: ToolCallInfo) -> None:
        card = self._cards.get(info.id)
        if card is None:
            widget = self.view.append("tool", "")
            card = self._cards[info.id] = widget.card
            card.decided.connect(lambda choice, i=info.id: self._decided(i, choice))
        card.show_call(info.name, info.arguments, info.state, info.result, info.seconds)

    def _decided(self, call_id: str, choice: str) -> None:
        ask = self._asks.get(call_id)
        if ask is not None and not ask.done():
            ask.set_result(choice)


def tools_switch(on: bool, toggled: Callable[[bool], None]) -> QToolButton:
    """The chat's Tools switch (Alt+T): when on, a new turn offers the tools of the MCP servers
    ticked in Settings → Tools. One switch for all conversations, kept in the settings."""
    button = QToolButton()
    button.setText("&Tools")
    button.setCheckable(True)
    button.setChecked(on)
    button.setAccessibleName("Offer tools to the assistant")
    button.setToolTip("Offer the tools of your MCP servers (Settings → Tools); you approve each call before it runs")
    button.toggled.connect(toggled)
    return button
