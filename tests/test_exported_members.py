"""The public surface: every package's `__all__` names exactly what it exports."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["s3skills", "s3skills.testing", "middleware", "tools"]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_name_in_all_is_importable(name: str) -> None:
    module = importlib.import_module(name)
    for member in module.__all__:
        assert getattr(module, member) is not None, f"{name}.{member}"


@pytest.mark.parametrize("name", PACKAGES)
def test_all_lists_every_public_name_the_package_defines(name: str) -> None:
    module = importlib.import_module(name)
    public = {
        member
        for member, value in vars(module).items()
        if not member.startswith("_")
        and getattr(value, "__module__", "").startswith(name)  # defined in the package, not imported from elsewhere
    }
    assert public <= set(module.__all__), f"exported but not in __all__: {sorted(public - set(module.__all__))}"


def test_the_names_the_architecture_fixes_are_public() -> None:
    import middleware
    import s3skills
    import tools

    for member in (
        "S3Backend",
        "SkillCatalog",
        "SkillMetadata",
        "create_skills_agent",
        "ScriptRunner",
        "Skill",
        "SkillRegistry",
        "usage_stats",
    ):
        assert member in s3skills.__all__
    assert "SkillsPromptMiddleware" in middleware.__all__
    assert "skill_tools" in tools.__all__
    backend_api = (
        "ls",
        "read",
        "grep",
        "glob",
        "write",
        "edit",
        "delete",
        "upload_files",
        "download_files",
        "ls_info",
        "grep_raw",
        "glob_info",
        "exists",
        "load_skill",
        "loaded_skills",
        "load_skills",
        "load_skills_frontmatter",
        "load_all_skills_formatted",
        "load_skill_content",
    )
    for method in backend_api:
        assert callable(getattr(s3skills.S3Backend, method, None)) or method == "loaded_skills", method
        if method != "loaded_skills":
            assert callable(getattr(s3skills.S3Backend, "a" + method)), "a" + method


def test_version_is_the_distribution_version() -> None:
    from importlib.metadata import version

    import s3skills

    assert s3skills.__version__ == version("s3skills")
