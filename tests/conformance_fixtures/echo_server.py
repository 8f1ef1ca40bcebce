"""A tiny stdio JSON-RPC server that the conformance harness's own tests talk to.

Methods: initialize, tools/list, tools/call (echo, after a log notification), hold and
release (held requests are answered in reverse order once released, so concurrent
responses arrive out of order), subscriptions/listen (acknowledged; answered with a
graceful closure on SIGTERM), say_raw (a line of non-JSON on stdout), quit (exit 4 at once).

--wrong     answers a little differently: reversed echoes, another tool name, exit 3 on SIGTERM
--stubborn  ignores SIGTERM and the end of its input; only SIGKILL ends it
FIXTURE_VERSION sets serverInfo.version; FIXTURE_PIDFILE, if set, receives the process id.
"""

import json
import os
import signal
import sys
import threading

WRONG = "--wrong" in sys.argv
STUBBORN = "--stubborn" in sys.argv
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
held: list = []
listens: list = []


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request_id, result: dict) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def handle(message: dict) -> None:
    method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
    if request_id is None:
        return
    if method == "initialize":
        version = os.environ.get("FIXTURE_VERSION", "1.0.0")
        answer(request_id, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                            "serverInfo": {"name": "echo-fixture", "version": version}})
    elif method == "tools/list":
        answer(request_id, {"tools": [{"name": "echo2" if WRONG else "echo", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        text = str(params.get("arguments", {}).get("text", ""))
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "echoing"}})
        answer(request_id, {"content": [{"type": "text", "text": text[::-1] if WRONG else text}]})
    elif method == "hold":
        held.append(request_id)
    elif method == "release":
        answer(request_id, {"released": len(held)})
        for waiting in reversed(held):
            answer(waiting, {"held": True})
        held.clear()
    elif method == "subscriptions/listen":
        listens.append(request_id)
        send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
              "params": {"_meta": {SUBSCRIPTION_ID: request_id}, "notifications": params.get("notifications", {})}})
    elif method == "quit":
        sys.exit(4)
    elif method == "say_raw":
        sys.stdout.write("this line is not JSON\n")
        answer(request_id, {})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})


def on_sigterm(signum, frame) -> None:
    if WRONG:
        os._exit(3)
    for listen in listens:
        answer(listen, {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: listen}})
    sys.exit(0)


def main() -> None:
    if "FIXTURE_PIDFILE" in os.environ:
        with open(os.environ["FIXTURE_PIDFILE"], "w") as pidfile:
            pidfile.write(str(os.getpid()))
    signal.signal(signal.SIGTERM, signal.SIG_IGN if STUBBORN else on_sigterm)
    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        try:
            message = json.loads(raw)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        handle(message if isinstance(message, dict) else {})
    if STUBBORN:
        threading.Event().wait()


main()
