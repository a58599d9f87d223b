"""Qt windows and widgets: the only layer that knows about Qt widgets."""

from desktop.ui.none_guard import pin_none

pin_none()  # before any widget exists: PySide6 6.12's void methods steal references to None
