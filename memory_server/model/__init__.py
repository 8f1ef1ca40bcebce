"""The graph model: the file's records and the immutable graph built from them, with the pure
operations the tools perform on it. It imports only the index primitives below it."""
