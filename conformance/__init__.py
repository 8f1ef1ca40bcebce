"""Record MCP stdio sessions as transcripts, replay them against any stdio server, and check any
stdio server against the protocol requirements every server shares.

``mcp-conformance record --out FILE -- SERVER...`` proxies a live session;
``mcp-conformance replay FILE... -- SERVER...`` checks a server against transcripts;
``mcp-conformance check -- SERVER...`` runs the built-in protocol requirements.
(``python -m conformance`` is the same command line.)
"""
