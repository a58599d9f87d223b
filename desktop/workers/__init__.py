"""Workers: each owns one model, its KV slots and a continuous-batching scheduler."""
