"""Where the memory lives: a file (MEMORY_FILE_PATH, the default) or a PostgreSQL database
(MEMORY_DATABASE_URL, with MEMORY_NAME picking one memory in it). One rule for the server and
the command line."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from .interface import StoreChoiceError  # (where the stores find it too)

if TYPE_CHECKING:
    from .interface import MeaningModel
    from .postgres.store import PostgresStore

DRIVER_MISSING = ("MEMORY_DATABASE_URL is set, but the PostgreSQL driver is not installed: "
                  "pip install 'kg-memory-mcp[postgres]' (or unset MEMORY_DATABASE_URL to keep the memory in a file)")


class Database(NamedTuple):
    url: str
    memory: str



def database_from(env: Mapping[str, str]) -> Database | None:
    """The database the environment names, or None for a memory file. StoreChoiceError when both
    a file and a database are named, or the memory name is not one."""
    url = env.get("MEMORY_DATABASE_URL", "")
    if not url:
        if env.get("MEMORY_NAME"):
            raise StoreChoiceError("MEMORY_NAME picks a memory in the database of MEMORY_DATABASE_URL, "
                                   "which is not set; a memory file is chosen with MEMORY_FILE_PATH")
        return None
    if env.get("MEMORY_FILE_PATH"):
        raise StoreChoiceError("both MEMORY_FILE_PATH and MEMORY_DATABASE_URL are set: the memory lives in a file "
                               "or in a database, not both; unset one of them")
    if not url.startswith(("postgresql://", "postgres://")) and "=" not in url:
        raise StoreChoiceError("MEMORY_DATABASE_URL is not a PostgreSQL connection URI "
                               "(postgresql://user:password@host:port/dbname)")
    from .postgres.names import memory_name_from

    try:
        return Database(url, memory_name_from(env.get("MEMORY_NAME")))
    except ValueError as error:
        raise StoreChoiceError(str(error)) from None


def open_database(database: Database, *, clock: Callable[[], str] | None = None,
                  meaning: MeaningModel | None = None) -> PostgresStore:
    """The store on that database (`clock`: what its writes record, see model.dates; `meaning`: the
    model its searches use, see PostgresStore); StoreChoiceError when the driver is not installed."""
    try:
        from .postgres.store import PostgresStore
    except ImportError:
        raise StoreChoiceError(DRIVER_MISSING) from None
    return PostgresStore(database.url, database.memory, clock=clock, meaning=meaning)
