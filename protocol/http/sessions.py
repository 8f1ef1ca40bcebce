"""The 2025-era sessions of one endpoint, by `Mcp-Session-Id`.

1. `initialize` without a session creates one, named by a random id; under OAuth it belongs to
   the token's subject, and no other subject can use it (its id alone finds nothing).
2. A session with no request in flight and no GET stream open for `idle_seconds` is ended when
   it is next named, or when a session is created: a server whose clients come and go keeps no
   more sessions than were used within the idle time, with no task watching the clock.
3. At most `max_sessions` are kept: beyond it, the one unused for longest (preferring one with
   nothing under way) is ended, and its client initializes again.
4. Ending a session cancels its requests in flight and ends its GET stream.

Time is read from `clock` (monotonic seconds), so that a test can move it.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterator

from ..inflight import InflightRequests
from ..peer import Peer
from ..server import Server
from .limits import MAX_SESSIONS, SESSION_IDLE_SECONDS
from .sse import Outbox

log = logging.getLogger("protocol.http")

class LegacySession:
    def __init__(self, server: Server, session_id: str, subject: str | None, now: float) -> None:
        self.id = session_id
        self.outbox = Outbox()  # what the GET stream will carry; kept while no GET is open
        self.peer = Peer(server, self.outbox.put, transport="http", session_id=session_id)
        self.inflight = InflightRequests()
        self.streaming = False
        self.last_used = now
        self.subject = subject  # under OAuth, who opened it: no other token may use it

    def idle_for(self, now: float) -> float:
        """Seconds since its last request or GET stream ended; 0 while one is under way."""
        return 0.0 if self.streaming or self.inflight else now - self.last_used

    def end(self) -> None:
        """Statement 4."""
        self.peer.close()
        self.outbox.close()
        self.inflight.cancel_all()


class Sessions:
    def __init__(self, server: Server, *, max_sessions: int = MAX_SESSIONS,
                 idle_seconds: float = SESSION_IDLE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.clock = clock
        self._sessions: dict[str, LegacySession] = {}

    def __iter__(self) -> Iterator[str]:
        """The ids of the sessions kept."""
        return iter(list(self._sessions))

    def get(self, session_id: str) -> LegacySession | None:
        """The session of that id as it is, expired or not."""
        return self._sessions.get(session_id)

    def find(self, session_id: str, subject: str | None) -> LegacySession | None:
        """The live session of that id and subject, now used (statements 1 and 2); else None."""
        session = self._sessions.get(session_id)
        now = self.clock()
        if session is not None and session.idle_for(now) >= self.idle_seconds:
            self._end_idle(session, now)
            return None
        if session is None or session.subject != subject:
            return None
        session.last_used = now
        return session

    def new(self, subject: str | None) -> LegacySession:
        """A new session of `subject`, after ending the expired ones and, when full, the one unused for longest."""
        now = self.clock()
        for expired in [s for s in self._sessions.values() if s.idle_for(now) >= self.idle_seconds]:
            self._end_idle(expired, now)
        if len(self._sessions) >= self.max_sessions:
            idle = [s for s in self._sessions.values() if not s.streaming and not s.inflight] or list(self._sessions.values())
            oldest = min(idle, key=lambda s: s.last_used)
            log.info("ending session %s, unused for the longest, to make room", oldest.id)
            self._sessions.pop(oldest.id).end()
        session = LegacySession(self.server, secrets.token_urlsafe(24), subject, now)
        self._sessions[session.id] = session
        return session

    def used(self, session: LegacySession) -> None:
        """Its request or GET stream just ended: it is idle from now on."""
        session.last_used = self.clock()

    def forget(self, session: LegacySession) -> None:
        """A session whose initialize was not answered with success: it was never handed out."""
        self._sessions.pop(session.id, None)

    def end(self, session: LegacySession) -> None:
        self._sessions.pop(session.id, None)
        session.end()

    def end_all(self) -> None:
        for session in list(self._sessions.values()):
            session.end()
        self._sessions.clear()

    def _end_idle(self, session: LegacySession, now: float) -> None:
        log.info("ending session %s, idle for %.0f s", session.id, session.idle_for(now))
        self._sessions.pop(session.id).end()
