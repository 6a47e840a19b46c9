"""What a case is, how one is declared, and how it says what went wrong."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import attrs

from subagent_host.conformance.mismatch import FRAMINGS, FramingName, Mismatch, short

if TYPE_CHECKING:
    from subagent_host.conformance.trial import Trial


# Keywords with a meaning to the runner: a case with AGENTS runs only with
# `--with-agents`.
AGENTS: Final = "agents"

CaseBody = Callable[["Trial"], Awaitable[None]]

# A case's whole time: the slowest (a stop's grace, a second server started on one
# state directory) take a few seconds; a server that hangs must not hang the run.
CASE_TIMEOUT_S: Final = 30.0


@attrs.frozen
class Case:
    """One conformance case: an id, the protocol.md section it checks, its body."""

    id: str
    section: str
    body: CaseBody
    framings: tuple[FramingName, ...] = FRAMINGS
    keywords: tuple[str, ...] = ()
    timeout_s: float = CASE_TIMEOUT_S

    @property
    def needs_agents(self) -> bool:
        return AGENTS in self.keywords

    def words(self) -> str:
        """What `-k` matches against: the id, the section and the keywords."""
        return " ".join((self.id, self.section, *self.keywords)).lower()


CASES: Final[list[Case]] = []


def case(
    case_id: str,
    section: str,
    *,
    framings: tuple[FramingName, ...] = FRAMINGS,
    keywords: tuple[str, ...] = (),
    timeout_s: float = CASE_TIMEOUT_S,
) -> Callable[[CaseBody], CaseBody]:
    """Register the decorated coroutine as a case (ids are unique)."""

    def register(body: CaseBody) -> CaseBody:
        if any(known.id == case_id for known in CASES):
            raise ValueError(f"duplicate conformance case id {case_id}")
        CASES.append(Case(case_id, section, body, framings, keywords, timeout_s))
        return body

    return register


def expect(condition: bool, expected: str, seen: Any) -> None:
    """Fail the case unless `condition` holds."""
    if not condition:
        raise Mismatch(expected, seen if isinstance(seen, str) else short(seen))


def expect_equal(seen: Any, wanted: Any, what: str) -> None:
    if seen != wanted:
        raise Mismatch(f"{what} = {short(wanted)}", short(seen))


def error_of(reply: Any, code: int, context: str = "") -> dict[str, Any]:
    """The reply's error object, which must carry `code`."""
    error = reply.get("error") if isinstance(reply, dict) else None
    if not isinstance(error, dict) or error.get("code") != code:
        where = f" {context}" if context else ""
        raise Mismatch(f"an error {code}{where}", short(reply))
    return error


def result_of(reply: Any, context: str = "") -> Any:
    """The reply's result, which must be there."""
    if not isinstance(reply, dict) or "result" not in reply:
        where = f" for {context}" if context else ""
        raise Mismatch(f"a result{where}", short(reply))
    return reply["result"]


def diagnostic_codes(error_or_result: dict[str, Any]) -> list[str]:
    """The `code` of each diagnostic in `data.diagnostics` or `diagnostics`."""
    holder = error_or_result.get("data", error_or_result)
    diagnostics = holder.get("diagnostics", []) if isinstance(holder, dict) else []
    return [str(d.get("code")) for d in diagnostics if isinstance(d, dict)]
