"""Omnidesk: a private, local omni assistant whose conversation KV caches survive between turns.

Layers: ui (Qt) → engine (gateway, pipeline) → workers (model owner loops) → model (torch).
"""

__version__ = "0.1.0"
