"""Routing chats to workers: the gateway, the worker pool and its mirror, sessions, streams, ETAs, health, departures, the event intake."""
