"""Session recordings (no Qt): the recorder that writes a session's folder off the hot path, the
call and chat hooks that feed it, replay files built after a session, and retention."""
