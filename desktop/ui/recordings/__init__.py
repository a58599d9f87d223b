"""The Recordings page: the list of recorded calls and chats, and the viewer that plays one back."""

from desktop.ui.recordings.page import RecordingsPage

__all__ = ["RecordingsPage"]
