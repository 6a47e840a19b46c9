"""`run/send`: a live message to an interactive child (protocol.md §23.2)."""

from __future__ import annotations

from typing import Final

from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.live_runs import child_index, held_run
from subagent_host.rpc.errors import InvalidParams
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.rpc.wire import SendParams, SendResult
from subagent_host.runs import live_requests
from subagent_host.values.choices import Delivery

MAX_MESSAGE_BYTES: Final = 64 * 1024
"""The most one live message may hold, in UTF-8."""


async def handle(params: SendParams, ctx: HandlerContext) -> SendResult:
    """Write the message now (`delivered`) or when the child's turn ends (`queued`)."""
    size = len(params.text.encode("utf-8", "surrogatepass"))
    if size == 0:
        raise InvalidParams([ParamProblem("text", "must not be empty")])
    if size > MAX_MESSAGE_BYTES:
        raise InvalidParams(
            [ParamProblem("text", f"is {size} bytes of UTF-8: at most {MAX_MESSAGE_BYTES}")]
        )
    run = await held_run(params.run_id, ctx)
    index = child_index(run, params.index)
    message_id, state = live_requests.send(
        run,
        ctx.orchestrator.control_of(run.run_id),
        index,
        params.text,
        params.delivery or Delivery.QUEUE,
        ctx.orchestrator.services.state_machine.emit,
    )
    return SendResult(message_id=message_id, state=state)
