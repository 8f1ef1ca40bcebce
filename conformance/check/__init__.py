"""``mcp-conformance check``: protocol requirements every MCP stdio server must meet, whatever its tools.

The requirements are a table. Each row names its spec section and level (MUST, SHOULD), the
era it applies to and what the server must have declared for it to apply; its check is a
small function over one exchange with a fresh server process: it sends lines and judges the
answers, raising :class:`Failed` with the reason. Before the rows run, two fresh processes
find out which eras the server claims: ``initialize`` (2025 versions) and ``server/discover``
(2026-07-28). A row whose era or capability the server does not claim is *not supported*,
never a failure; a shape check without the era's ``schema.json`` is *not checked*.

Nothing here calls a tool or reads a resource: a check lists, pings and sends bad lines.
Server-specific values (names, versions, instructions, the tools themselves) are never
compared, only their shapes.

- `model`: the era names and protocol names, requirements, verdicts, claims, schemas, settings, report.
- `messages`: the client's lines, and the judging of answers (`expect_*`, `message_problem`).
- `requirements`: the checks and the table (`REQUIREMENTS`).
- `runner`: discovery and `run_check`.
"""

from .model import LEGACY, MODERN, CheckSettings, Claims, Failed, Report, Requirement, Schemas, Unsupported, Verdict
from .requirements import REQUIREMENTS, requirement_ids
from .runner import applicability, discover, run_check

__all__ = [
    "LEGACY", "MODERN", "REQUIREMENTS", "CheckSettings", "Claims", "Failed", "Report", "Requirement", "Schemas",
    "Unsupported", "Verdict", "applicability", "discover", "requirement_ids", "run_check",
]
