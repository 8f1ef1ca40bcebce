"""Running the table: discovery of the eras the server claims, then each applicable row with a fresh server."""

from __future__ import annotations

from typing import Any

import anyio

from conformance.probe import STARTUP, Line, fresh_server

from .messages import call, initialize
from .model import (
    CONCURRENCY,
    LEGACY,
    MODERN,
    CheckSettings,
    Claims,
    Context,
    Failed,
    Report,
    Requirement,
    Schemas,
    Unsupported,
    Verdict,
)
from .requirements import REQUIREMENTS


async def discover(settings: CheckSettings) -> Claims:
    """Which eras the server claims: initialize and server/discover, each in a fresh process."""
    answers: dict[str, dict[str, Any] | None] = {}
    exchanges: dict[str, tuple[Line, ...]] = {}

    async def ask(era: str, message: dict[str, Any]) -> None:
        async with fresh_server(settings.command, settings.env, settings.timeout) as probe:
            answers[era] = await probe.request(message)
            if answers[era] is None and probe.output_ended:
                status = await probe.exit_status(min(settings.timeout, 2.0))
                probe.note("the server closed its output" + (f" and exited with status {status}" if status is not None else ""))
            exchanges[era] = tuple(probe.exchange)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ask, LEGACY, initialize())
        tasks.start_soon(ask, MODERN, call(MODERN, "discover", "server/discover"))
    return Claims(answers[LEGACY], answers[MODERN], exchanges)


def applicability(requirement: Requirement, claims: Claims, schemas: Schemas | None) -> Verdict | str:
    """The era a requirement runs in, or the verdict it gets without running."""
    eras = claims.eras()
    if requirement.check is None:
        evidence = claims.exchanges.get(eras[0] if eras else LEGACY, ())
        if eras:
            return Verdict(requirement, "pass", f"claims: {', '.join(eras)}", eras[0], evidence)
        exchange = (*claims.exchanges.get(LEGACY, ()), *claims.exchanges.get(MODERN, ()))
        return Verdict(requirement, "fail", f"{claims.why_not(LEGACY)}; {claims.why_not(MODERN)}", None, exchange)
    era = (eras[0] if eras else None) if requirement.era == "first" else requirement.era
    if era is None:
        return Verdict(requirement, "not supported", "the server claims no era")
    if not claims.claimed(era):
        return Verdict(requirement, "not supported", claims.why_not(era), era, claims.exchanges.get(era, ()))
    if requirement.needs and requirement.needs not in claims.capabilities(era):
        reason = f"the server does not declare the {requirement.needs} capability in the {era} era"
        return Verdict(requirement, "not supported", reason, era)
    if requirement.schema:
        if schemas is None:
            return Verdict(requirement, "not checked", "no schema: pass --spec", era)
        if not schemas.has(claims.version(era)):
            reason = f"no schema for {claims.version(era)} in {schemas.root}: pass --spec with <version>/schema.json"
            return Verdict(requirement, "not checked", reason, era)
    return era


async def run_requirement(requirement: Requirement, era: str, context: Context, settings: CheckSettings) -> Verdict:
    async with fresh_server(settings.command, settings.env, settings.timeout) as probe:
        try:
            # One bound for the whole exchange, so a server that trickles out answers cannot stall the check.
            with anyio.fail_after(_exchange_bound(settings)):
                assert requirement.check is not None
                await requirement.check(probe, context)
        except Failed as failure:
            return Verdict(requirement, "fail", str(failure), era, tuple(probe.exchange))
        except Unsupported as unsupported:
            return Verdict(requirement, "not supported", str(unsupported), era, tuple(probe.exchange))
        except TimeoutError:
            reason = f"the exchange did not finish within {_exchange_bound(settings):g} s"
            return Verdict(requirement, "fail", reason, era, tuple(probe.exchange))
        return Verdict(requirement, "pass", "", era, tuple(probe.exchange))


def _exchange_bound(settings: CheckSettings) -> float:
    return STARTUP + settings.timeout * 4


async def run_check(settings: CheckSettings) -> Report:
    schemas = Schemas(settings.spec) if settings.spec is not None else None
    claims = await discover(settings)
    rows = [requirement for requirement in REQUIREMENTS if not settings.only or requirement.id in settings.only]
    verdicts: list[Verdict | None] = [None] * len(rows)
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def judge(index: int, requirement: Requirement) -> None:
        decided = applicability(requirement, claims, schemas)
        if isinstance(decided, Verdict):
            verdicts[index] = decided
            return
        async with limiter:
            verdicts[index] = await run_requirement(requirement, decided, Context(decided, claims, schemas), settings)

    async with anyio.create_task_group() as tasks:
        for index, requirement in enumerate(rows):
            tasks.start_soon(judge, index, requirement)
    return Report(settings.command, claims, settings.spec, tuple(verdict for verdict in verdicts if verdict is not None))
