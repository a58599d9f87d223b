"""The turn-based chat page: conversations list, streamed replies with cache badges, composer.

`ChatPage` is the one thing the main window needs from here."""

from desktop.ui.chat.page import ChatPage

__all__ = ["ChatPage"]
