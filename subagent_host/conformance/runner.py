"""Run the selected cases, a few at a time, each bounded, and say how each went."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Literal

import attrs

from subagent_host.conformance.mismatch import FramingName, Mismatch, short
from subagent_host.conformance.registry import Case
from subagent_host.conformance.schema import Validator
from subagent_host.conformance.trial import Trial

Verdict = Literal["PASS", "FAIL"]

# Four cases at once keep two cores busy: most of a case is a server starting.
DEFAULT_JOBS: Final = 4
# Any one answer: generous on a loaded machine, yet a silent server fails in seconds.
DEFAULT_REPLY_TIMEOUT_S: Final = 10.0


@attrs.frozen
class Outcome:
    case: Case
    framing: FramingName
    verdict: Verdict
    seconds: float
    expected: str = ""
    seen: str = ""
    stderr: str = ""


@attrs.frozen
class Settings:
    server: tuple[str, ...]
    validator: Validator
    jobs: int = DEFAULT_JOBS
    reply_timeout: float = DEFAULT_REPLY_TIMEOUT_S


async def run_framing(
    cases: Sequence[Case],
    framing: FramingName,
    settings: Settings,
    report: Callable[[Outcome], None],
) -> list[Outcome]:
    """Every case of `cases` that applies to `framing`, `settings.jobs` at a time."""
    gate = asyncio.Semaphore(settings.jobs)

    async def one(case: Case) -> Outcome:
        async with gate:
            outcome = await run_case(case, framing, settings)
        report(outcome)
        return outcome

    return list(await asyncio.gather(*(one(c) for c in cases if framing in c.framings)))


async def run_case(case: Case, framing: FramingName, settings: Settings) -> Outcome:
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="shc-") as directory:
        trial = Trial(
            settings.server, framing, Path(directory), settings.validator, settings.reply_timeout
        )
        failure: Mismatch | None = None
        try:
            async with asyncio.timeout(case.timeout_s):
                await case.body(trial)
        except Mismatch as mismatch:
            failure = mismatch
        except TimeoutError:
            failure = Mismatch(
                f"the case to end within {case.timeout_s:g} s", "the server hung (timed out)"
            )
        except Exception as exc:
            # A reply of an unexpected shape (a missing key, a wrong type) or a server that
            # cannot be started: one case's failure, reported as such; the run goes on.
            failure = Mismatch("a reply the case could read", f"{type(exc).__name__}: {exc}")
        finally:
            forced = await trial.clean_up()
        if failure is None and forced:
            failure = Mismatch(
                "the server to exit at end of input, leaving no process (§6)", "; ".join(forced)
            )
        problems = [p for c in trial.connections for p in c.shape_problems]
        if failure is None and problems:
            failure = Mismatch("every message to match the protocol's shapes", short(problems))
        stderr = b"".join(bytes(c.stderr) for c in trial.connections)
    seconds = time.monotonic() - began
    if failure is None:
        return Outcome(case, framing, "PASS", seconds)
    return Outcome(
        case,
        framing,
        "FAIL",
        seconds,
        failure.expected,
        failure.seen,
        stderr.decode("utf-8", "replace")[-2000:],
    )
