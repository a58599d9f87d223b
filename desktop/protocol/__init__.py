"""The contract between the engine (gateway) and the workers, beneath both: commands, events,
slot snapshots, token stats, the host interface with its statuses, and the engine's stats
records. Torch-free; nothing here imports the engine, the workers or the UI."""

from desktop.protocol.commands import (
    AppendInput, Chat, Command, CreateSession, EndSession, Generate, Reset, Shutdown, Stop, TruncateReply,
)
from desktop.protocol.events import (
    TERMINAL, ChunkEvent, Done, ErrorEvent, Event, FinishReason, Heartbeat, MatchKind, PrefillDone, PrefillProgress,
    QueueDone, Queued, QueueUpdate, SlotInfo, SlotState, TokenStats,
)
from desktop.protocol.engine_stats import (
    EngineStats, QueuedStats, QueueStats, RequestCounts, RunningStats, SlotStats, WorkerStats,
)
from desktop.protocol.host import EventSink, WorkerHost, WorkerState, WorkerStatus
from desktop.protocol.reasons import CacheReason

__all__ = [
    "AppendInput", "Chat", "Command", "CreateSession", "EndSession", "Generate", "Reset", "Shutdown", "Stop", "TruncateReply",
    "TERMINAL", "ChunkEvent", "Done", "ErrorEvent", "Event", "FinishReason", "Heartbeat", "MatchKind", "PrefillDone",
    "PrefillProgress", "QueueDone", "Queued", "QueueUpdate", "SlotInfo", "SlotState", "TokenStats",
    "EngineStats", "QueuedStats", "QueueStats", "RequestCounts", "RunningStats", "SlotStats", "WorkerStats",
    "EventSink", "WorkerHost", "WorkerState", "WorkerStatus", "CacheReason",
]
