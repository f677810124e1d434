"""What `pip install s3skills` gives a user: install names that never collide, a lean install.

The wheel is built from this tree and installed into a fresh virtualenv (its
third-party dependencies are borrowed from the test environment through a `.pth`
line, so no network is needed). An application folder with its own `tools.py` and
`middleware/` package then imports both its modules and s3skills'.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (found,) = out.glob("s3skills-*.whl")
    return found


@pytest.mark.slow
def test_the_wheel_installs_middleware_and_tools_only_under_s3skills(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"s3skills"}
    assert "s3skills/middleware/skills_prompt.py" in names
    assert "s3skills/tools/skill_tools.py" in names
    assert "s3skills/examples/library/escrituras/compraventa/SKILL.md" in names
    assert "s3skills/py.typed" in names


@pytest.mark.slow
def test_an_app_with_its_own_tools_and_middleware_imports_s3skills_from_a_fresh_venv(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The dependencies (deepagents, langchain, aioboto3...) come from the test environment;
    # a .pth-added folder's own .pth files (our editable install) are not processed.
    Path(site, "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    app = tmp_path / "app"
    (app / "middleware").mkdir(parents=True)
    (app / "tools.py").write_text("WHO = 'the app'\n")
    (app / "middleware" / "__init__.py").write_text("WHO = 'the app'\n")
    check = textwrap.dedent(
        """
        import tools, middleware
        from s3skills import S3Backend
        from s3skills.middleware import SkillsPromptMiddleware
        from s3skills.tools import skill_tools
        import s3skills
        assert tools.WHO == middleware.WHO == "the app", (tools.__file__, middleware.__file__)
        assert s3skills.__file__.startswith(SITE), s3skills.__file__
        print("ok", S3Backend.__name__, SkillsPromptMiddleware.__name__, skill_tools.__name__)
        """
    ).replace("SITE", repr(site))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = subprocess.run(
        [str(python), "-c", check], cwd=app, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ok", "S3Backend", "SkillsPromptMiddleware", "skill_tools"]


def test_the_default_install_does_not_pull_the_demo_server() -> None:
    requires = metadata.requires("s3skills") or []
    base = [r for r in requires if "extra ==" not in r]
    assert not any(r.lower().startswith("moto") for r in base), base
    assert any(r.startswith("moto") and 'extra == "demo"' in r for r in requires), requires
    declared = {r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower() for r in base}
    assert "python-frontmatter" not in declared


def _third_party_imports() -> set[str]:
    """Top-level modules imported anywhere in the package (parsed, not imported)."""
    import ast

    found: set[str] = set()
    for folder, _, files in os.walk(ROOT / "s3skills", followlinks=True):
        if "examples" in Path(folder).relative_to(ROOT).parts:
            continue
        for name in files:
            if not name.endswith(".py"):
                continue
            tree = ast.parse(Path(folder, name).read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return found


def test_every_base_dependency_is_imported_by_the_package() -> None:
    requires = [r for r in metadata.requires("s3skills") or [] if "extra ==" not in r]
    names = {r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower() for r in requires}
    provided = metadata.packages_distributions()
    imported_dists = {d.lower() for module in _third_party_imports() for d in provided.get(module, [])}
    unused = sorted(n for n in names if n.replace("_", "-") not in {d.replace("_", "-") for d in imported_dists})
    assert not unused, f"declared but never imported: {unused}"


@pytest.mark.slow
def test_the_wheel_ships_the_consoles_templates_and_stylesheet(wheel: Path) -> None:
    """The console has no build step and no CDN: every page and asset is package data."""
    names = set(zipfile.ZipFile(wheel).namelist())
    pages = {p.name for p in (ROOT / "s3skills" / "console" / "templates").glob("*.html")}
    assert {f"s3skills/console/templates/{p}" for p in pages} <= names
    assert "s3skills/console/static/console.css" in names
