"""LangChain tools of s3skills: `cargar_habilidad`, `list_skills`, `read_skill`, `use_skill`."""

from s3skills.tools.script_tool import script_tool
from s3skills.tools.skill_tools import load_skill_update, skill_tools
from s3skills.tools.use_skill import SkillExecutionMiddleware

__all__ = ["SkillExecutionMiddleware", "load_skill_update", "script_tool", "skill_tools"]
