"""Answers that fit a model's context: a read's full answer, cut into pages within a budget.

Pure: the entity and relation objects of a full answer go in; pages come out, each the JSON of
its structured content plus the notes that tell the model what was left out and how to get it.
A cut answer is kept (a few of them, most recent first) under an id that its cursors carry,
signed with a key of this process, so following cursors walks one consistent answer: the
memory as it was when the first page was made.

The budget counts UTF-8 bytes of all text a page gives the model (its JSON and its notes).
A character is at least one byte, so no page holds more characters than the budget either,
and the JSON-RPC line (the JSON twice: as structured content, and escaped as text) stays
within about three times the budget.

One job per module; import a name from the module that holds it (this package re-exports none):

- :mod:`.budget`: the answer budget (MEMORY_ANSWER_BUDGET) and the sizes that decide what fits;
- :mod:`.pages`: pages, and the answers they are cut from (:class:`.pages.Facts` for a search);
- :mod:`.entity_pages`: pages of entities and relations (read_graph, open_nodes, by entities);
- :mod:`.fact_pages`: pages of a search answer made of facts;
- :mod:`.notes`: the notes a page carries;
- :mod:`.cursors`: cursors, their signatures, and the key of the call they belong to;
- :mod:`.kept`: the cut answers kept for their cursors (per client, in all, in bytes);
- :mod:`.pager`: :class:`.pager.Pager`, which ties them together for a process.

A name with a leading underscore is the package's own: its modules share it, nothing outside uses it.
"""
