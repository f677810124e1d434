"""The skills layer: `SkillLibrary` (the seam), the catalog, SKILL.md parsing and rendering,
matching, code skills, versions and usage events."""

from s3skills.skills.code.registry import Skill, SkillRegistry, merge_index, skill_id_of, tool_name
from s3skills.skills.format.model import InvalidSkill, ParsedSkill, Problem, SkillInfo, SkillMetadata, SkillProblem
from s3skills.skills.format.parse import get_skill_doc, parse_skill_md, render_skill_md, validate_skill_md
from s3skills.skills.index.catalog import LibraryIndex, SkillCatalog, SkillEntry
from s3skills.skills.library import LoadResult, SkillFile, SkillHome, SkillLibrary, SkillPage, check_leaf_clash
from s3skills.skills.ranking.embedding import Encoder, HybridRanker, MiniLMEncoder
from s3skills.skills.ranking.rankers import LexicalRanker, Ranker
from s3skills.skills.reads import anested_now
from s3skills.skills.usage import SkillUsage, log_usage, usage_stats
from s3skills.skills.versions.history import FileVersion, SkillChanged, SkillVersion, read_pinned, version_id_of

__all__ = [
    "Encoder",
    "FileVersion",
    "HybridRanker",
    "InvalidSkill",
    "LexicalRanker",
    "LibraryIndex",
    "LoadResult",
    "MiniLMEncoder",
    "ParsedSkill",
    "Problem",
    "Ranker",
    "Skill",
    "SkillCatalog",
    "SkillChanged",
    "SkillEntry",
    "SkillFile",
    "SkillHome",
    "SkillInfo",
    "SkillLibrary",
    "SkillMetadata",
    "SkillPage",
    "SkillProblem",
    "SkillRegistry",
    "SkillUsage",
    "SkillVersion",
    "anested_now",
    "check_leaf_clash",
    "get_skill_doc",
    "log_usage",
    "merge_index",
    "parse_skill_md",
    "read_pinned",
    "render_skill_md",
    "skill_id_of",
    "tool_name",
    "usage_stats",
    "validate_skill_md",
    "version_id_of",
]
