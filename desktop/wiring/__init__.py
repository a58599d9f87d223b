"""The composition root's parts (desktop/composition.py puts them together): the engine it runs
(workers → gateway → monitor, rebuilt on new settings), the pages it builds, the proxy that
stands in for the gateway of the moment."""
