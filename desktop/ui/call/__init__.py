"""The Call page: a voice call with the assistant (phase, microphone level, live transcript,
per-turn metrics). `CallPage` is the one thing the main window needs from here."""

from desktop.ui.call.page import CallPage

__all__ = ["CallPage"]
