"""One-node LangGraph runs that call a backend method inside a real run.

Inside such a run the backend resolves the tenant the way it does in an agent:
`user_id`/`ticket_id` from the run's context, `thread_id` from its config, and
`loaded_skills` from the state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph


class RunState(TypedDict, total=False):
    loaded_skills: list[str]
    op: Callable[[], Any]
    result: Any


class RunContext(TypedDict, total=False):
    user_id: str
    ticket_id: str


def _graph(node: Callable[[RunState], Any]) -> Any:
    graph = StateGraph(RunState, context_schema=RunContext)
    graph.add_node("call_backend", node)
    graph.add_edge(START, "call_backend")
    graph.add_edge("call_backend", END)
    return graph.compile()


async def _acall(state: RunState) -> RunState:
    return {"result": await state["op"]()}


SYNC_RUN = _graph(lambda state: {"result": state["op"]()})
ASYNC_RUN = _graph(_acall)
