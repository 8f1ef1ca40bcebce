"""The command line on a memory in a database (MEMORY_DATABASE_URL): stats, check, export and
import, as on a file, with the database's memory in place of the file. `import` moves a
person's file into a team's memory; `export` writes it back out in every format."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..storage.choice import Database, StoreChoiceError, database_from, open_database
from .commands import CommandError, export_graph, read_import

if TYPE_CHECKING:
    from ..storage.postgres.store import PostgresStore


def where_the_memory_is(on_file: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """The command's runner: `on_file`, or its twin on the database when MEMORY_DATABASE_URL is set
    (decided when it runs, inside commands.run, which reports a CommandError for a person)."""
    def run(args: argparse.Namespace) -> int:
        try:
            database = database_from(os.environ)
        except StoreChoiceError as error:
            raise CommandError(str(error)) from None
        if database is None:
            return on_file(args)
        return run_on(args, database)
    return run


def run_on(args: argparse.Namespace, database: Database) -> int:
    if getattr(args, "file", None) is not None:
        raise CommandError("--file names a memory file, but MEMORY_DATABASE_URL puts the memory in a "
                           "database: unset MEMORY_DATABASE_URL to work on a file")
    try:
        from ..model.dates import clock_from
        from ..retrieval.meaning import MEANING

        store = open_database(database, clock=clock_from(os.environ), meaning=MEANING)
    except StoreChoiceError as error:
        raise CommandError(str(error)) from None
    from ..model.graph import GraphError

    try:
        with store:
            return int(RUNNERS[args.command](args, store))
    except GraphError as error:
        raise CommandError(str(error)) from None


def _stats(args: argparse.Namespace, store: PostgresStore) -> int:
    from .inspection import describe_figures, stats

    figures = stats(store.graph(), top=args.top)
    print("\n".join([f"Memory          {store.where}", *describe_figures(figures, top=args.top)]))
    return 0


def _check(args: argparse.Namespace, store: PostgresStore) -> int:
    # Rows are written by the server only, each one checked as it was made: reading them all back
    # into a graph is the check (a row changed by hand into something unreadable fails it).
    graph = store.graph()
    print(f"{store.where}: {len(graph.entities):,} entities, {len(graph.relations):,} relations; "
          "every row is usable. Nothing to do.")
    return 0


def _export(args: argparse.Namespace, store: PostgresStore) -> int:
    return export_graph(args, store.graph(), store.where, store.memory, None)


def _import(args: argparse.Namespace, store: PostgresStore) -> int:
    from ..model.writes import merge_graph
    from .importer import describe_merge, summary

    source, incoming, progress = read_import(args)
    value: dict[str, Any]
    if args.dry_run:
        value = merge_graph(store.graph(), incoming.entities, incoming.relations).value
    else:
        progress.say(f"merging into {store.where} in one transaction")
        value = store.merge(incoming.entities, incoming.relations).value
    heading = "Dry run, nothing was changed. Importing" if args.dry_run else "Imported"
    print(f"{heading} {source} ({summary(incoming)}) into {store.where}:")
    for line in describe_merge(value, incoming, dry_run=args.dry_run):
        print(f"  {line}")
    progress.say("done")
    return 0


RUNNERS = {"stats": _stats, "check": _check, "export": _export, "import": _import}
