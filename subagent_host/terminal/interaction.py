"""An interactive child's conversation as the terminal shows it (protocol.md §23): its
`turn`, `input` and `permission` events as lines (`logs`, `show`), the permissions it
waits on (worked out from its recorded `permission` events: `show`, `watch`), and the
option that `allow`/`reject` (with `--always`) picks from one (`permit`, `watch`).

Every text a child or a client gave goes through `views.printable` and is bounded: a
message on one line of at most INPUT_CHARS, a tool's summary of at most SUMMARY_CHARS.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from subagent_host.terminal.views import printable, shorten
from subagent_host.values.choices import OptionKind, PermissionStage
from subagent_host.values.events import InputEvent, PermissionEvent, TurnEvent
from subagent_host.values.interaction import PendingPermission, PermissionOption

INPUT_CHARS: Final = 200
"""The most of a live message an `input` line shows (on one line; an ellipsis marks a cut)."""
SUMMARY_CHARS: Final = 120
"""The most of a tool's input summary a permission line shows."""


Said = TurnEvent | InputEvent | PermissionEvent
"""The events of an interactive child's conversation."""
SAID: Final = (TurnEvent, InputEvent, PermissionEvent)


class NoSuchAnswer(ValueError):
    """The permission offers no option of the kind asked for; the message says which it
    offers."""


def choose_option(pending: PendingPermission, allow: bool, always: bool) -> PermissionOption:
    """The option of `pending` that answers `allow` or reject, once or (`always`) always.

    Never a broader answer than asked: `allow` without `always` takes only `allow-once`,
    even where the CLI offers `allow-always` alone (then NoSuchAnswer says so)."""
    if allow:
        kind = OptionKind.ALLOW_ALWAYS if always else OptionKind.ALLOW_ONCE
    else:
        kind = OptionKind.REJECT_ALWAYS if always else OptionKind.REJECT_ONCE
    for option in pending.options:
        if option.kind is kind:
            return option
    offered = ", ".join(option.kind.value for option in pending.options) or "nothing"
    raise NoSuchAnswer(
        f"permission {pending.permission_id} offers no {kind.value} answer (it offers {offered})"
    )


def pending_permissions(events: Iterable[PermissionEvent]) -> tuple[PendingPermission, ...]:
    """The permissions asked and neither answered nor withdrawn, oldest first, from a
    run's `permission` events in order (what the server's `pendingPermissions` holds)."""
    asked: dict[str, PendingPermission] = {}
    for event in events:
        if event.stage is PermissionStage.ASKED:
            asked[event.permission_id] = event.pending()
        else:
            asked.pop(event.permission_id, None)
    return tuple(asked.values())


def tool_words(name: str, kind: str, summary: str) -> str:
    """`Bash (execute): printf x > written.txt`: a tool asked about, on one line."""
    said = shorten(printable(summary), SUMMARY_CHARS)
    head = f"{shorten(printable(name))} ({kind})"
    return f"{head}: {said}" if said else head


def pending_line(pending: PendingPermission) -> str:
    """`p-1 child 0 asks: Bash (execute): printf x > f [allow-once, reject-once]`."""
    options = ", ".join(option.kind.value for option in pending.options)
    what = tool_words(pending.name, pending.kind.value, pending.summary)
    return f"{pending.permission_id} child {pending.index} asks: {what} [{options}]"


def event_line(event: Said) -> str:
    """A `turn`, `input` or `permission` event in words:
    `turn start`, `turn end: interrupted`, `message m-1 queued: fix the tests`,
    `permission p-1 asked: Bash (execute): ls`, `permission p-1 answered: allow-once by
    client:terminal`, `permission p-1 withdrawn: the turn was interrupted`."""
    match event:
        case TurnEvent(phase=phase, stop_reason=reason):
            return f"turn {phase}" + (f": {printable(reason)}" if reason else "")
        case InputEvent(message_id=message_id, state=state, text=text, reason=reason):
            line = f"message {message_id} {state}: {shorten(printable(text), INPUT_CHARS)}"
            return line + (f" (refused: {shorten(printable(reason))})" if reason else "")
        case PermissionEvent(stage=PermissionStage.ASKED) as asked:
            what = tool_words(asked.name, asked.kind.value, asked.summary)
            return f"permission {asked.permission_id} asked: {what}"
        case PermissionEvent(stage=PermissionStage.ANSWERED) as answered:
            chosen = next((o for o in answered.options if o.option_id == answered.option_id), None)
            answer = chosen.kind.value if chosen is not None else answered.option_id or "?"
            line = f"permission {answered.permission_id} answered: {answer}"
            line += f" by {printable(answered.answered_by)}" if answered.answered_by else ""
            line += f" ({shorten(printable(answered.reason))})" if answered.reason else ""
            return line + f" [{tool_words(answered.name, answered.kind.value, answered.summary)}]"
        case PermissionEvent(permission_id=permission_id, reason=reason):
            return f"permission {permission_id} withdrawn" + (
                f": {shorten(printable(reason))}" if reason else ""
            )
