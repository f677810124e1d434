"""`run_skill_script`: run a script of a loaded skill (seed 003). Off unless an agent adds it.

The tool reads the skills loaded in this thread from the agent state
(`loaded_skills`, plus any loaded on the backend instance outside a graph), so
only their `scripts/` can run, and answers with the `ScriptObservation` as JSON.
Read docs/THREAT_MODEL.md before enabling it: with the default `LocalLauncher` the runner
is not a sandbox; pass `ScriptRunner(backend, launcher=BubblewrapLauncher())` for one.
"""

from __future__ import annotations

import json
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from s3skills.aio import run_sync
from s3skills.config import check_length
from s3skills.fs import S3Backend
from s3skills.runner import ScriptRunner
from s3skills.tenancy import thread_skills

__all__ = ["RunSkillScriptInput", "script_tool"]

JSONArgs = dict[str, Any] | list[Any] | str | int | float | bool | None


class RunSkillScriptInput(BaseModel):
    """The model-facing arguments of `run_skill_script`.

    Declared explicitly: a function parameter named `args` would be renamed by
    the schema inference (pydantic reserves it for `*args`).
    """

    skill: str = Field(
        description="A loaded skill: its id ('calculos/impuestos-transmision') or its folder name "
        "('impuestos-transmision')."
    )
    script: str = Field(description="The script's path inside the skill's scripts/ folder, e.g. 'main.py'.")
    args: JSONArgs = Field(default=None, description="The script's input: one JSON value, usually an object.")


_DOC = """Run a script from the scripts/ folder of a skill you have LOADED (cargar_habilidad first).

The script gets `args` as one JSON value and must print one JSON value. The answer is a JSON
object: ok, result (the script's output), error (what went wrong and what to do), exit_code,
stderr_tail, duration_ms, timed_out, truncated."""


def script_tool(backend: S3Backend, runner: ScriptRunner | None = None) -> BaseTool:
    """The `run_skill_script` tool for an agent using `backend`.

    Args:
        backend: The agent's `S3Backend` (it resolves the user of each call).
        runner: The `ScriptRunner` with the limits and launcher to use; by default
            one with the defaults (`SKILL_TIMEOUT` or 30 s, 1 MiB of output, 512 MB,
            arguments on stdin, `LocalLauncher`: not a sandbox).
    """
    the_runner = runner or ScriptRunner(backend)

    limits = backend.skills.config.limits

    async def arun(skill: str, script: str, runtime: ToolRuntime[Any, Any], args: JSONArgs = None) -> str:
        try:  # the caps of `s3skills.config.Limits`, where the model's arguments enter
            check_length(str(skill), limits.max_name_chars, "'skill'")
            check_length(str(script), limits.max_path_chars, "'script'")
            check_length(json.dumps(args, ensure_ascii=False), limits.max_args_chars, "'args' (as JSON)")
        except (ValueError, TypeError) as exc:
            return json.dumps({"ok": False, "error": f"refused: {exc}"})
        state_skills = thread_skills(runtime.state).loaded  # client input: validated
        # Deduplicated: inside a run the backend sees the state's skills too, and a skill
        # listed twice would make its folder name look ambiguous (`calc` for `tools/calc`).
        loaded = list(dict.fromkeys([*state_skills, *backend.loaded_skills]))
        observation = await the_runner.arun(skill, script, args, loaded=loaded)
        return observation.to_json()

    def run(skill: str, script: str, runtime: ToolRuntime[Any, Any], args: JSONArgs = None) -> str:
        return run_sync(arun(skill, script, runtime, args))

    return StructuredTool.from_function(
        func=run, coroutine=arun, name="run_skill_script", description=_DOC, args_schema=RunSkillScriptInput
    )
