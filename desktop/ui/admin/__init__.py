"""The admin panel: workers, KV slots, the request queue and cache counters, refreshed live
from gateway.stats() and what the engine monitor (gateway/monitor.py) heard from the hosts."""
