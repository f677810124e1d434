"""Skills that are Python objects of the host application: the registry (`Skill`,
`SkillRegistry`), executable skills (`CodeSkill`, `PromptSkill`, `SkillContext`) and running them.

Imports the base layer, `format/` and `usage`; reads a skill's files through a small protocol
that `SkillLibrary` satisfies, never the library module itself.
"""

__all__: list[str] = []
