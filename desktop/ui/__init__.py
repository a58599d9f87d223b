"""Qt windows and widgets: the only layer that knows about Qt widgets."""
