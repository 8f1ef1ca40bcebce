"""A memory server that announces a change before it happens: the real server behind a proxy
that sends one ``notifications/resources/updated`` ahead of time.

Usage: early_updates.py --early|--spurious -- SERVER COMMAND...

When the server answers ``resources/subscribe``, the proxy writes an update for the subscribed
URI just before that answer, so it reaches the client before the client's first write. Then
--early     drops the server's own first update: the same updates, the first one early;
--spurious  drops the server's own second update: one update spurious, a later one missing.
Everything else passes through unchanged, line by line.
"""

import json
import subprocess
import sys
import threading

MODE = sys.argv[1]
SERVER = sys.argv[sys.argv.index("--") + 1 :]
DROPPED = {"--early": 1, "--spurious": 2}[MODE]  # which of the server's own updates goes missing


def message_of(line: bytes) -> dict:
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def main() -> int:
    server = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    subscribes: dict[str, str] = {}  # request id (as JSON) of each resources/subscribe -> its URI
    lock = threading.Lock()

    def forward_client() -> None:
        assert server.stdin is not None
        for line in sys.stdin.buffer:
            message = message_of(line)
            if message.get("method") == "resources/subscribe":
                with lock:
                    subscribes[json.dumps(message.get("id"))] = message.get("params", {}).get("uri", "")
            server.stdin.write(line)
            server.stdin.flush()
        server.stdin.close()

    threading.Thread(target=forward_client, daemon=True).start()
    assert server.stdout is not None
    updates = 0
    for line in iter(server.stdout.readline, b""):
        message = message_of(line)
        if message.get("method") == "notifications/resources/updated":
            updates += 1
            if updates == DROPPED:
                continue
        with lock:
            uri = subscribes.pop(json.dumps(message.get("id")), None) if "result" in message else None
        if uri is not None:
            early = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
            sys.stdout.buffer.write(json.dumps(early).encode() + b"\n")
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    return server.wait()


sys.exit(main())
