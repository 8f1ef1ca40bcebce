"""What a store on a database says went wrong: its errors (each says that nothing was changed), and
the reason of a driver's error as a person reads it."""

from __future__ import annotations

from ...model.graph import GraphError
from .names import without_password


class DatabaseUnreachable(GraphError):
    """The database could not be reached (or went away during the call); nothing was changed."""


class KeyTooLong(GraphError):
    """A name or relation type too long for the tables' keys (P16); nothing was changed."""


class DatabaseBusy(GraphError):
    """Every connection of the server was in use by other calls for longer than a call waits; the
    database answers. Nothing was changed."""


class NotAllowed(GraphError):
    """The role of MEMORY_DATABASE_URL lacks a privilege the call needs; nothing was changed."""


class DatabaseRefused(GraphError):
    """The database answered, and refused this server's connection (a wrong password, a role or a
    database that does not exist); nothing was changed."""


class SchemaTooNew(GraphError):
    """The database's tables are of a newer version than this server understands (P6)."""


def reason_of(error: BaseException) -> str:
    """The first line of an error's message, for a person, with any password in it masked."""
    text = str(error).strip()
    return without_password(text.splitlines()[0]) if text else type(error).__name__
