"""The graph model: the file's records (records) with their dates and authors (dates, authors), the
immutable graph built from them and its reads (graph), the items a write is given (items) and the
pure write rules the tools perform on it (writes), its census and the summary cut from it (census),
and its search indexes (indexes). It imports only the index primitives below it."""
