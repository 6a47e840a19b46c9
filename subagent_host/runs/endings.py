"""How a run or a child ends: one type per terminal status, each with exactly its facts.

protocol.md §12 ("Statuses") says what each terminal status carries; these types
say it too, so an ending without its facts is a type error rather than a check
at run time: `Failed` cannot be made without its `error`, a run's `TimedOut`
without its `enforced_timeout_ms`. A child's endings carry what the run's
ending would take from them (a child's timed-out its enforced timeout, its
limit-reached names the limit as its `reason`) and may carry how its attempt's
process ended (`ChildExit`).

Output: a completed ending's is whole, any other's partial (or absent); the
constructors refuse anything else (`_output`). The state machine (state.py)
takes one ending and writes its facts onto the run or child.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from subagent_host.backends.exits import StoppedBy
from subagent_host.values import RunStatus
from subagent_host.values.choices import ReachedLimit
from subagent_host.values.facts import ErrorInfo, OutputInfo, Usage


def _whole(_: object, attribute: attrs.Attribute[OutputInfo | None], output: object) -> None:
    if isinstance(output, OutputInfo) and output.partial:
        raise ValueError(f"a completed ending's {attribute.name} is whole, not partial")


def _partial(_: object, attribute: attrs.Attribute[OutputInfo | None], output: object) -> None:
    if isinstance(output, OutputInfo) and not output.partial:
        raise ValueError(f"an ending other than completed has a partial {attribute.name}")


def _whole_output() -> OutputInfo | None:
    """An optional output, whole if given (a field of a completed ending)."""
    output: OutputInfo | None = attrs.field(default=None, validator=_whole)
    return output


def _partial_output() -> OutputInfo | None:
    """An optional output, partial if given (a field of any other ending)."""
    output: OutputInfo | None = attrs.field(default=None, validator=_partial)
    return output


# --- a run's endings -----------------------------------------------------------------


@attrs.frozen
class Completed:
    status: ClassVar[RunStatus] = RunStatus.COMPLETED
    output: OutputInfo | None = _whole_output()


@attrs.frozen
class Failed:
    status: ClassVar[RunStatus] = RunStatus.FAILED
    error: ErrorInfo
    output: OutputInfo | None = _partial_output()


@attrs.frozen
class Cancelled:
    status: ClassVar[RunStatus] = RunStatus.CANCELLED
    reason: str
    output: OutputInfo | None = _partial_output()


@attrs.frozen
class TimedOut:
    status: ClassVar[RunStatus] = RunStatus.TIMED_OUT
    reason: str
    """`timeout` or `stall`."""
    enforced_timeout_ms: int
    output: OutputInfo | None = _partial_output()


@attrs.frozen
class LimitReached:
    status: ClassVar[RunStatus] = RunStatus.LIMIT_REACHED
    reached_limit: ReachedLimit
    """`max-turns`, `max-tokens` or `max-cost`."""
    output: OutputInfo | None = _partial_output()


@attrs.frozen
class Interrupted:
    status: ClassVar[RunStatus] = RunStatus.INTERRUPTED
    reason: str
    output: OutputInfo | None = _partial_output()


RunEnding = Completed | Failed | Cancelled | TimedOut | LimitReached | Interrupted


# --- a child's endings ---------------------------------------------------------------


@attrs.frozen
class ChildExit:
    """How a started attempt's process ended, and what its CLI reported by then.

    Given with an ending, every field is written (None included: a parser that failed
    leaves no usage); an ending without one leaves the child's as they are — an attempt
    that never started, or one interrupted by a server's death, keeps its samples.
    """

    exit_code: int | None = None
    signal: int | None = None
    stopped_by: StoppedBy | None = None
    usage: Usage | None = None
    backend_session_id: str | None = None


@attrs.frozen
class ChildCompleted:
    status: ClassVar[RunStatus] = RunStatus.COMPLETED
    output: OutputInfo | None = _whole_output()
    exit: ChildExit | None = None


@attrs.frozen
class ChildFailed:
    status: ClassVar[RunStatus] = RunStatus.FAILED
    error: ErrorInfo
    output: OutputInfo | None = _partial_output()
    exit: ChildExit | None = None


@attrs.frozen
class ChildCancelled:
    status: ClassVar[RunStatus] = RunStatus.CANCELLED
    reason: str
    output: OutputInfo | None = _partial_output()
    exit: ChildExit | None = None


@attrs.frozen
class ChildTimedOut:
    """The timeout the server enforced is kept with the child (stored, never on the
    wire: a snapshot shows it on the run): the run's, whenever the run settles from it."""

    status: ClassVar[RunStatus] = RunStatus.TIMED_OUT
    reason: str
    enforced_timeout_ms: int
    output: OutputInfo | None = _partial_output()
    exit: ChildExit | None = None


@attrs.frozen
class ChildLimitReached:
    """A child names the limit it reached as its `reason`; the run carries `reached_limit`."""

    status: ClassVar[RunStatus] = RunStatus.LIMIT_REACHED
    reason: str
    output: OutputInfo | None = _partial_output()
    exit: ChildExit | None = None


@attrs.frozen
class ChildInterrupted:
    status: ClassVar[RunStatus] = RunStatus.INTERRUPTED
    reason: str
    output: OutputInfo | None = _partial_output()
    exit: ChildExit | None = None


ChildEnding = (
    ChildCompleted
    | ChildFailed
    | ChildCancelled
    | ChildTimedOut
    | ChildLimitReached
    | ChildInterrupted
)
