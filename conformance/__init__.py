"""Record MCP stdio sessions as transcripts and replay them against any stdio server.

``python -m conformance record --out FILE -- SERVER...`` proxies a live session;
``python -m conformance replay FILE... -- SERVER...`` checks a server against transcripts.
"""
