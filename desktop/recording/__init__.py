"""Session recordings on disk (format v1), without Qt: the recorder that writes a session's folder
off the hot path, the call and chat hooks that feed it, replay files built after a session,
retention; and the reading side: the reader, the library listing, the player."""
