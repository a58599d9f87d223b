"""The admin panel: workers, KV slots, the request queue and cache counters, refreshed live
from gateway.stats() and the monitor's tap on the worker hosts."""
