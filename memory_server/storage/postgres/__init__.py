"""The memory in PostgreSQL (see store.py). Nothing is imported here: names.py is read where the
driver is not installed."""
