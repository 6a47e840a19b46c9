"""A permission's `asked` event as the pending permission it makes: the one conversion
the server's `pendingPermissions` and every client reading the events share."""

from __future__ import annotations

import attrs
import pytest

from subagent_host.values.choices import OptionKind, PermissionStage, ToolKind
from subagent_host.values.events import PermissionEvent
from subagent_host.values.interaction import PendingPermission, PermissionOption

OPTIONS = (
    PermissionOption("allow", "Allow", OptionKind.ALLOW_ONCE),
    PermissionOption("deny", "Deny", OptionKind.REJECT_ONCE),
)
ASKED = PermissionEvent(
    index=2,
    permission_id="2.toolu-7",
    stage=PermissionStage.ASKED,
    name="Write",
    kind=ToolKind.EDIT,
    summary="notes.txt",
    options=OPTIONS,
    tool_id="toolu_01",
)


def test_an_asked_event_makes_the_pending_permission_it_tells_of() -> None:
    assert ASKED.pending() == PendingPermission(
        index=2,
        permission_id="2.toolu-7",
        tool_id="toolu_01",
        name="Write",
        kind=ToolKind.EDIT,
        summary="notes.txt",
        options=OPTIONS,
    )


def test_every_field_of_a_pending_permission_is_the_events_own() -> None:
    # A field added to PendingPermission (and the event) cannot be left behind: each one,
    # by name, carries the event's value.
    pending = ASKED.pending()
    for field in attrs.fields(PendingPermission):
        assert getattr(pending, field.name) == getattr(ASKED, field.name), field.name
    assert attrs.evolve(ASKED, tool_id=None).pending().tool_id is None


@pytest.mark.parametrize("stage", [PermissionStage.ANSWERED, PermissionStage.WITHDRAWN])
def test_an_answer_or_a_withdrawal_is_not_pending(stage: PermissionStage) -> None:
    with pytest.raises(ValueError, match=f"a {stage.value} permission event is not pending"):
        attrs.evolve(ASKED, stage=stage).pending()
