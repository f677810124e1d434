"""LangChain agent middleware of s3skills: the skills section of the system prompt."""

from s3skills.middleware.skills_prompt import IndexFormat, SkillsPromptMiddleware, SkillsState, merge_loaded_skills

__all__ = ["IndexFormat", "SkillsPromptMiddleware", "SkillsState", "merge_loaded_skills"]
