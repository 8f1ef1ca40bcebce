"""The Docker image's recipe, checked without a Docker engine.

No engine runs where the tests run, so the image is checked in two halves: the Dockerfile is
parsed (what it COPYs exists and survives .dockerignore, its ENTRYPOINT is a console script
the project declares), and its build is re-enacted: the build stage's COPY set is laid out in
a temporary context, `pip wheel --no-deps` builds the wheel there as stage 1 does, and the
wheel goes into a fresh virtual environment with its dependencies from PyPI as stage 2 does.
That environment's `mcp-server-memory` must then serve both protocol eras over real pipes
and keep its memory in MEMORY_FILE_PATH, the variable the image points into its volume.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import one_at_a_time, shared_directory

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
PYPROJECT = REPO_ROOT / "pyproject.toml"
VOLUME_DIR = "/app/dist"
INSTALL_TIMEOUT = 600
RESPONSE_TIMEOUT = 60
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


# ---------------------------------------------------------------------------------------
# Reading a Dockerfile and a .dockerignore (pure)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str


@dataclass(frozen=True)
class Copy:
    sources: tuple[str, ...]
    destination: str
    from_stage: str | None


def instructions(dockerfile_text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in dockerfile_text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    if pending.strip():
        logical.append(pending)
    result = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        result.append(Instruction(keyword.upper(), rest.strip()))
    return result


def stages(parsed: list[Instruction]) -> list[list[Instruction]]:
    result: list[list[Instruction]] = []
    for instruction in parsed:
        if instruction.keyword == "FROM":
            result.append([])
        if result:
            result[-1].append(instruction)
    return result


def copy_of(instruction: Instruction) -> Copy:
    words = instruction.arguments.split()
    flags = [w for w in words if w.startswith("--")]
    paths = [w for w in words if not w.startswith("--")]
    from_stage = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
    return Copy(tuple(paths[:-1]), paths[-1], from_stage)


def copies(stage: list[Instruction]) -> list[Copy]:
    return [copy_of(i) for i in stage if i.keyword == "COPY"]


def values_of(stage: list[Instruction], keyword: str) -> list[str]:
    return [i.arguments for i in stage if i.keyword == keyword]


def env_of(stage: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for arguments in values_of(stage, "ENV"):
        for pair in arguments.split():
            name, _, value = pair.partition("=")
            env[name] = value
    return env


def ignore_pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex over context-relative paths."""
    pieces = []
    for token in re.split(r"(\*\*/|\*\*|\*|\?)", pattern.strip("/")):
        if token == "**/":
            pieces.append("(?:.*/)?")
        elif token == "**":
            pieces.append(".*")
        elif token == "*":
            pieces.append("[^/]*")
        elif token == "?":
            pieces.append("[^/]")
        else:
            pieces.append(re.escape(token))
    return re.compile("".join(pieces))


def ignore_rules(dockerignore_text: str) -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for raw in dockerignore_text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        rules.append((keep, ignore_pattern(line.lstrip("!"))))
    return rules


def is_ignored(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last matching pattern wins, and excluding a folder excludes its files."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for keep, rule in rules:
        if any(rule.fullmatch(prefix) for prefix in prefixes):
            ignored = not keep
    return ignored


def console_scripts(pyproject_text: str) -> dict[str, str]:
    return tomllib.loads(pyproject_text)["project"]["scripts"]


# ---------------------------------------------------------------------------------------
# The parsing itself, on small texts
# ---------------------------------------------------------------------------------------


def test_instructions_join_continuations_and_drop_comments():
    text = "FROM a AS b\n# note\nRUN one \\\n  # inside\n  && two\nCOPY --from=b /x /y\n"
    parsed = instructions(text)
    assert parsed == [
        Instruction("FROM", "a AS b"),
        Instruction("RUN", "one  && two"),
        Instruction("COPY", "--from=b /x /y"),
    ]
    assert copy_of(parsed[2]) == Copy(("/x",), "/y", "b")


def test_ignore_rules_follow_docker_semantics():
    rules = ignore_rules(".venv\n**/__pycache__\n*.md\n!README.md\n")
    assert is_ignored(".venv/bin/python", rules)
    assert is_ignored("protocol/__pycache__/x.pyc", rules)
    assert is_ignored("NOTES.md", rules)
    assert not is_ignored("README.md", rules)
    assert not is_ignored("docs/NOTES.md", rules)  # "*.md" is anchored at the context root
    assert not is_ignored("protocol/server.py", rules)


# ---------------------------------------------------------------------------------------
# The project's Dockerfile and .dockerignore
# ---------------------------------------------------------------------------------------


def dockerfile_stages() -> list[list[Instruction]]:
    return stages(instructions(DOCKERFILE.read_text()))


def context_copies() -> list[Copy]:
    return [c for stage in dockerfile_stages() for c in copies(stage) if c.from_stage is None]


def test_two_stages_on_python_slim():
    build, final = dockerfile_stages()
    assert values_of(build, "FROM") == ["python:3.12-slim AS build"]
    assert values_of(final, "FROM") == ["python:3.12-slim"]
    assert any("pip wheel --no-deps -w /dist ." in run for run in values_of(build, "RUN"))
    assert [c.from_stage for c in copies(final)] == ["build"]
    assert copies(final)[0].sources == ("/dist",)


def test_every_copied_path_exists_in_the_repository():
    sources = [s for c in context_copies() for s in c.sources]
    assert sources, "the Dockerfile copies nothing from the build context"
    missing = [s for s in sources if not (REPO_ROOT / s).exists()]
    assert not missing, f"COPY sources missing from the repository: {missing}"


def test_dockerignore_keeps_what_is_copied_and_drops_local_state():
    rules = ignore_rules(DOCKERIGNORE.read_text())
    dropped = [s for c in context_copies() for s in c.sources if is_ignored(s, rules)]
    assert not dropped, f".dockerignore excludes paths the Dockerfile copies: {dropped}"
    for local_state in (".venv/bin/python", ".git/HEAD", "memory_server/__pycache__/x.pyc",
                        ".pytest_cache/README.md", "memory_server/memory.jsonl"):
        assert is_ignored(local_state, rules), local_state


def test_entrypoint_is_a_declared_console_script():
    final = dockerfile_stages()[-1]
    (entrypoint,) = values_of(final, "ENTRYPOINT")
    command = json.loads(entrypoint)  # exec form, so signals reach the server itself
    assert command[0] in console_scripts(PYPROJECT.read_text()), command


def test_memory_file_lives_in_the_volume():
    final = dockerfile_stages()[-1]
    memory_file = env_of(final)["MEMORY_FILE_PATH"]
    assert memory_file == f"{VOLUME_DIR}/memory.jsonl"
    assert values_of(final, "WORKDIR") == ["/app"]
    # The non-root user must own the volume's mount point, or a fresh volume is read-only.
    (user,) = values_of(final, "USER")
    assert user != "root"
    setup = " ".join(values_of(final, "RUN"))
    assert f"mkdir -p {VOLUME_DIR}" in setup and f"chown -R {user}:{user} /app" in setup


# ---------------------------------------------------------------------------------------
# The build re-enacted, and the installed entrypoint over real pipes
# ---------------------------------------------------------------------------------------


def lay_out_context(build_stage: list[Instruction], workdir: Path) -> None:
    """Copy what the build stage COPYs to where it lands under its WORKDIR."""
    for copy in copies(build_stage):
        destination = workdir / copy.destination
        for source in copy.sources:
            origin = REPO_ROOT / source
            target = destination / origin.name if copy.destination.endswith("/") else destination
            if origin.is_dir():
                shutil.copytree(origin, target,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, target)


def run_checked(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                          timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="session")
def entrypoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's entrypoint command, installed the way the two stages install it: once in a run, by
    the first worker that needs it (the others wait for it, then use it)."""
    root = shared_directory(request, tmp_path_factory, "image", across_runs=False)
    with one_at_a_time("image", where=root):
        built = root / "entrypoint"
        if not built.exists():
            built.write_text(str(install_the_image(root)))
    return Path(built.read_text())


def install_the_image(root: Path) -> Path:
    for made in ("src", "dist", "venv"):  # what an earlier attempt cut short left
        shutil.rmtree(root / made, ignore_errors=True)
    context = root / "src"
    context.mkdir()
    lay_out_context(dockerfile_stages()[0], context)
    wheels = root / "dist"
    run_checked([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), "."],
                cwd=context)
    (wheel,) = wheels.glob("*.whl")
    venv = root / "venv"
    run_checked([sys.executable, "-m", "venv", str(venv)], cwd=root)
    (install,) = [run for run in values_of(dockerfile_stages()[-1], "RUN") if "pip install" in run]
    extras = extras_of(install)
    run_checked([str(venv / "bin" / "python"), "-m", "pip", "install",
                 "--disable-pip-version-check", f"{wheel}{extras}"], cwd=root)
    command = venv / "bin" / json.loads(values_of(dockerfile_stages()[-1], "ENTRYPOINT")[0])[0]
    assert command.is_file()
    return command


def extras_of(install: str) -> str:
    """The extras the image's `pip install` line gives the wheel (`[http,semantic]`), or ''."""
    found = re.search(r"\.whl\)?\"?(\[[A-Za-z0-9_,-]+\])", install)
    return found.group(1) if found else ""


def test_the_image_installs_the_readme_default_and_what_a_team_needs():
    (install,) = [run for run in values_of(dockerfile_stages()[-1], "RUN") if "pip install" in run]
    extras = set(extras_of(install).strip("[]").split(","))
    assert {"semantic", "http", "postgres", "oauth"} <= extras, install


class StdioPeer:
    """The installed server over its real stdin/stdout pipes."""

    def __init__(self, command: Path, memory_file: Path, workdir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["MEMORY_FILE_PATH"] = str(memory_file)
        self.stderr_path = workdir / "stderr.log"
        self._stderr = self.stderr_path.open("wb")
        # cwd outside the checkout: everything must come from the installed wheel.
        self.process = subprocess.Popen([str(command)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self._stderr,
                                        env=env, cwd=workdir)
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.process.stdout, selectors.EVENT_READ)
        self._buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def stderr_tail(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-2000:]

    def response(self, request_id: int) -> dict[str, Any]:
        deadline = time.monotonic() + RESPONSE_TIMEOUT
        while True:
            line, newline, rest = self._buffer.partition(b"\n")
            if newline:
                self._buffer = rest
                message = json.loads(line)
                if message.get("id") == request_id:
                    return message
                continue
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no response to {request_id}; stderr:\n{self.stderr_tail()}"
            if self._selector.select(remaining):
                chunk = os.read(self.process.stdout.fileno(), 65536)
                assert chunk, f"server closed stdout; stderr:\n{self.stderr_tail()}"
                self._buffer += chunk

    def finish(self) -> int:
        """Close stdin as a client does on exit; the server must end by itself."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=RESPONSE_TIMEOUT)
        finally:
            self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=RESPONSE_TIMEOUT)
        self._selector.close()
        self.process.stdout.close()
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        self._stderr.close()


@pytest.fixture
def peer(entrypoint: Path, tmp_path: Path):
    volume = tmp_path / "volume"
    volume.mkdir()
    started = StdioPeer(entrypoint, volume / "memory.jsonl", tmp_path)
    yield started
    started.close()


def memory_records(memory_file: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in memory_file.read_text().splitlines() if line.strip()]


def test_installed_entrypoint_serves_a_legacy_client_and_keeps_memory_in_the_file(
    peer: StdioPeer, tmp_path: Path
):
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "docker-check", "version": "1"}}})
    initialized = peer.response(1)
    assert "error" not in initialized, initialized
    assert initialized["result"]["protocolVersion"] == "2025-11-25"
    assert "tools" in initialized["result"]["capabilities"]
    peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    entity = {"name": "docker_volume_check", "entityType": "test",
              "observations": ["written through MEMORY_FILE_PATH"]}
    peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "create_entities", "arguments": {"entities": [entity]}}})
    created = peer.response(2)
    assert "error" not in created and not created["result"].get("isError"), created
    assert peer.finish() == 0, peer.stderr_tail()
    records = memory_records(tmp_path / "volume" / "memory.jsonl")
    # Its line as the reference writes it, and the dates this server adds to it.
    assert any({"type": "entity", **entity}.items() <= record.items() for record in records), records


def test_installed_entrypoint_searches_by_meaning(peer: StdioPeer):
    """The image answers as the README's install does: `dog` finds a fact that never says dog."""
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"_meta": MODERN_META, "name": "create_entities", "arguments": {"entities": [
                   {"name": "Biscuit", "entityType": "pet", "observations": ["a border collie, three years old"]},
                   {"name": "Oslo", "entityType": "city", "observations": ["capital of Norway"]}]}}})
    created = peer.response(1)
    assert "error" not in created and not created["result"].get("isError"), created
    peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"_meta": MODERN_META, "name": "search_nodes", "arguments": {"query": "dog"}}})
    found = peer.response(2)
    assert "error" not in found, found
    names = [entity["name"] for entity in found["result"]["structuredContent"]["entities"]]
    assert names == ["Biscuit"], found
    assert peer.finish() == 0, peer.stderr_tail()


def test_installed_entrypoint_serves_a_modern_client(peer: StdioPeer):
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
               "params": {"_meta": MODERN_META}})
    discovered = peer.response(1)
    assert "error" not in discovered, discovered
    result = discovered["result"]
    assert result["resultType"] == "complete"
    assert "2026-07-28" in result["supportedVersions"]
    assert "tools" in result["capabilities"]
    assert peer.finish() == 0, peer.stderr_tail()


def test_installed_entrypoint_serves_streamable_http_with_a_token(entrypoint: Path, tmp_path: Path):
    """The command docs/docker.md gives for a team (`--http`), with the extra the image installs."""
    import socket

    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(MEMORY_FILE_PATH=str(tmp_path / "memory.jsonl"), MCP_MEMORY_HTTP_TOKEN="docker-token")
    process = subprocess.Popen([str(entrypoint), "--http", f"127.0.0.1:{port}"], env=env, cwd=tmp_path,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + RESPONSE_TIMEOUT
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.05)
        body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": MODERN_META}}
        headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover",
                   "accept": "application/json, text/event-stream"}
        url = f"http://127.0.0.1:{port}/mcp"
        assert httpx.post(url, json=body, headers=headers, timeout=RESPONSE_TIMEOUT).status_code == 401
        discovered = httpx.post(url, json=body, headers={**headers, "authorization": "Bearer docker-token"},
                                timeout=RESPONSE_TIMEOUT)
        assert discovered.status_code == 200 and "2026-07-28" in discovered.json()["result"]["supportedVersions"]
        process.terminate()
        assert process.wait(RESPONSE_TIMEOUT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
