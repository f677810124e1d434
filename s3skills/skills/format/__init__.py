"""Reading and writing `SKILL.md`: the model (`SkillInfo`, `SkillMetadata`), the hardened YAML 1.2
frontmatter loader, parsing, rendering, the naming rules of the Agent Skills format and the
severity of each problem.

Imports only the base layer (`s3skills.errors`, `s3skills.ids`): it is the floor of the skills layer.
"""

__all__: list[str] = []
