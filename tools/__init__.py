"""LangChain tools of s3skills: `cargar_habilidad`, `list_skills`, `read_skill`."""

from s3skills.tools.script_tool import script_tool
from s3skills.tools.skill_tools import load_skill_update, skill_tools

__all__ = ["load_skill_update", "script_tool", "skill_tools"]
