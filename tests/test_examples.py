"""The bundled example library: valid skills, a real PDF, a script that keeps the runner's contract."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from s3skills.examples import LIBRARY, skill_ids
from s3skills.layout import KeyLayout
from s3skills.skills.format.parse import parse_skill_md, validate_skill_md

SEEDS = KeyLayout.seeds()  # these tests arrange raw keys in the seeds' layout

EXPECTED_SKILLS = [
    "calculos/impuestos-transmision",
    "contratos/arrendamiento",
    "escrituras/compraventa",
    "escrituras/hipoteca",
]
PDF = LIBRARY / "escrituras/compraventa/resources/plantilla.pdf"
ITP = LIBRARY / "calculos/impuestos-transmision/scripts/calcular_itp.py"
SKILL_MDS = sorted(LIBRARY.glob("**/SKILL.md"))


# -- the library -----------------------------------------------------------------------------


def test_library_is_package_data() -> None:
    assert isinstance(LIBRARY, Path)
    assert LIBRARY.is_dir()
    assert (resources.files("s3skills.examples") / "library").is_dir()
    assert skill_ids() == EXPECTED_SKILLS


def test_required_files_exist() -> None:
    for rel in (
        "escrituras/compraventa/disclosure_clausulas.md",
        "escrituras/compraventa/resources/ejemplo.md",
        "escrituras/compraventa/resources/plantilla.pdf",
        "contratos/arrendamiento/references/ley-arrendamientos-urbanos.md",
        "calculos/impuestos-transmision/scripts/calcular_itp.py",
    ):
        assert (LIBRARY / rel).is_file(), rel
    for skill in EXPECTED_SKILLS:
        others = [p for p in (LIBRARY / skill).rglob("*") if p.is_file() and p.name != "SKILL.md"]
        assert others, f"{skill} has no file besides SKILL.md"


def test_no_junk_in_the_library() -> None:
    junk = [p for p in LIBRARY.rglob("*") if p.name in ("__pycache__", ".DS_Store") or p.suffix == ".pyc"]
    assert not junk


@pytest.mark.parametrize("path", SKILL_MDS, ids=lambda p: p.parent.relative_to(LIBRARY).as_posix())
def test_skill_md_has_no_problems(path: Path) -> None:
    data = path.read_bytes()
    assert validate_skill_md(data, folder=path.parent.name) == []
    parsed = parse_skill_md(data, folder=path.parent.name)
    assert parsed.warnings == ()
    meta = parsed.metadata
    assert meta.name == path.parent.name
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta.name)
    # What it does AND when to use it (in Spanish).
    assert "Úsala cuando" in meta.description
    assert len(meta.description) <= 1024
    assert parsed.body.lstrip().startswith("# ")
    assert len(parsed.body.splitlines()) < 100, "keep SKILL.md concise: detail goes in the other files"


@pytest.mark.parametrize("path", SKILL_MDS, ids=lambda p: p.parent.relative_to(LIBRARY).as_posix())
def test_skill_md_points_to_files_that_exist(path: Path) -> None:
    """Progressive disclosure: every file the instructions name is in the skill folder."""
    body = parse_skill_md(path.read_bytes(), folder=path.parent.name).body
    named = set(re.findall(r"`((?:references/|resources/|scripts/|disclosure_)[^`\s]+)`", body))
    for rel in named:
        assert (path.parent / rel).is_file(), f"{path.parent.name}/SKILL.md names {rel}, which is missing"
    others = {p.relative_to(path.parent).as_posix() for p in path.parent.rglob("*") if p.is_file()} - {"SKILL.md"}
    assert others <= named, f"files never mentioned by the instructions: {sorted(others - named)}"


def test_skill_cross_references_exist() -> None:
    for path in SKILL_MDS:
        for ref in re.findall(r"habilidad `([a-z0-9/-]+)`", path.read_text(encoding="utf-8")):
            assert ref in EXPECTED_SKILLS, f"{path}: unknown skill {ref}"


# -- the PDF -------------------------------------------------------------------------------------


def _pdf_objects(data: bytes) -> dict[int, bytes]:
    """Check the file structure (header, xref, trailer, %%EOF) and return its objects by number."""
    assert data.startswith(b"%PDF-1.")
    assert data.rstrip().endswith(b"%%EOF")
    tail = re.search(rb"startxref\s+(\d+)\s+%%EOF\s*$", data)
    assert tail, "no startxref before %%EOF"
    xref_at = int(tail.group(1))
    assert data[xref_at:].startswith(b"xref")
    section = re.match(rb"xref\r?\n(\d+) (\d+)\r?\n", data[xref_at:])
    assert section
    first, count = int(section.group(1)), int(section.group(2))
    assert first == 0
    entries_at = xref_at + section.end()
    objects: dict[int, bytes] = {}
    offsets = []
    for number in range(count):
        entry = data[entries_at + 20 * number : entries_at + 20 * (number + 1)]
        match = re.fullmatch(rb"(\d{10}) (\d{5}) ([nf])(?: \r|\r\n| \n)", entry)
        assert match, f"bad xref entry {entry!r}"
        if match.group(3) == b"n":
            offset = int(match.group(1))
            assert data[offset:].startswith(f"{number} 0 obj".encode()), f"object {number} is not at {offset}"
            offsets.append((offset, number))
    for offset, number in offsets:
        end = data.index(b"endobj", offset)
        objects[number] = data[offset:end]
    trailer = data[entries_at + 20 * count : data.index(b"startxref", entries_at)]
    assert trailer.startswith(b"trailer")
    assert re.search(rb"/Size %d\b" % count, trailer)
    root = re.search(rb"/Root (\d+) 0 R", trailer)
    assert root
    assert b"/Type /Catalog" in objects[int(root.group(1))]
    return objects


def test_pdf_is_a_valid_one_page_pdf() -> None:
    data = PDF.read_bytes()
    assert len(data) < 20_000
    objects = _pdf_objects(data)
    pages = [body for body in objects.values() if re.search(rb"/Type /Pages\b", body)]
    assert len(pages) == 1
    assert b"/Count 1" in pages[0]
    assert sum(1 for body in objects.values() if re.search(rb"/Type /Page\b", body)) == 1
    streams = [body for body in objects.values() if b"stream" in body]
    assert streams
    for body in streams:
        length = int(re.search(rb"/Length (\d+)", body).group(1))
        start = body.index(b"stream\n") + len(b"stream\n")
        content = body[start : start + length]
        assert body[start + length :].lstrip().startswith(b"endstream")
        assert b"BT" in content
        assert b"Tj" in content
        assert b"PLANTILLA DE ESCRITURA DE COMPRAVENTA" in content


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")
def test_pdf_opens_in_poppler(tmp_path: Path) -> None:
    text = subprocess.run(["pdftotext", str(PDF), "-"], capture_output=True, check=True).stdout
    assert "COMPRAVENTA" in text.decode("utf-8")
    assert "Ante mí" in text.decode("utf-8")
    if shutil.which("pdftoppm"):
        subprocess.run(["pdftoppm", "-r", "20", "-png", str(PDF), str(tmp_path / "page")], check=True)
        assert list(tmp_path.glob("page*.png"))


# -- calcular_itp.py -----------------------------------------------------------------------------


def _run_itp(*argv: str) -> tuple[int, object]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    proc = subprocess.run(
        [sys.executable, "-I", str(ITP), *argv], capture_output=True, text=True, env=env, timeout=30, check=False
    )
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"stdout must be exactly one JSON value: {proc.stdout!r}"
    return proc.returncode, json.loads(lines[0])


def test_itp_script_is_executable_and_standard_library_only() -> None:
    assert os.access(ITP, os.X_OK)
    source = ITP.read_text(encoding="utf-8")
    assert source.startswith("#!/usr/bin/env python3\n")
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.split(".")[0])
    assert modules <= set(sys.stdlib_module_names)


@pytest.mark.parametrize(
    ("args", "base", "cuota"),
    [
        ({"precio": 250000, "comunidad": "madrid"}, 250000.0, 15000.0),
        ({"precio": 200000, "comunidad": "Andalucía"}, 200000.0, 14000.0),
        ({"precio": 1500000, "comunidad": "Cataluña"}, 1500000.0, 155000.0),  # 10 % + 11 % above 1 M
        ({"precio": 180000, "comunidad": "madrid", "valor_referencia": 200000}, 200000.0, 12000.0),
        ({"precio": 99999.99, "comunidad": "castilla y leon"}, 99999.99, 8000.0),
    ],
)
def test_itp_good_input(args: dict[str, object], base: float, cuota: float) -> None:
    code, out = _run_itp(json.dumps(args))
    assert code == 0
    assert isinstance(out, dict)
    assert out["base_imponible"] == base
    assert out["cuota"] == pytest.approx(cuota, abs=0.01)
    assert sum(t["cuota"] for t in out["tramos"]) == pytest.approx(out["cuota"], abs=0.02)
    assert "ilustrativos" in out["aviso"]


@pytest.mark.parametrize(
    "argv",
    [
        (),
        ('{"precio": 1, "comunidad": "madrid"}', "extra"),
        ("not json",),
        ("[250000]",),
        ('{"comunidad": "madrid"}',),
        ('{"precio": 250000}',),
        ('{"precio": -5, "comunidad": "madrid"}',),
        ('{"precio": 0, "comunidad": "madrid"}',),
        ('{"precio": true, "comunidad": "madrid"}',),
        ('{"precio": "250000", "comunidad": "madrid"}',),
        ('{"precio": NaN, "comunidad": "madrid"}',),
        ('{"precio": 250000, "comunidad": "narnia"}',),
        ('{"precio": 250000, "comunidad": 7}',),
        ('{"precio": 250000, "comunidad": "madrid", "tipo": 3}',),
    ],
)
def test_itp_bad_input(argv: tuple[str, ...]) -> None:
    code, out = _run_itp(*argv)
    assert code == 2
    assert isinstance(out, dict)
    assert isinstance(out["error"], str)
    assert out["error"]
    assert "madrid" in out["comunidades_validas"]


def test_itp_runs_through_the_script_runner(moto_endpoint: str, bucket: str) -> None:
    """The real runner: fetch `scripts/` from S3, run it scrubbed, parse its one JSON value."""
    import aioboto3

    import s3skills.runner as runner_module
    from s3skills import S3Backend
    from s3skills.seed import seed_example_library

    session = aioboto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
    backend = S3Backend(
        bucket, user_id="ana", endpoint_url=moto_endpoint, session=session, region_name="us-east-1", layout=SEEDS
    )
    seed_example_library(backend.store, "ana", layout=SEEDS)
    runner = runner_module.ScriptRunner(backend, timeout=30)
    skill = "calculos/impuestos-transmision"
    good = runner.run(skill, "calcular_itp.py", {"precio": 250000, "comunidad": "madrid"}, loaded=[skill])
    assert good.ok, good.error
    assert good.result["cuota"] == 15000.0
    bad = runner.run(skill, "calcular_itp.py", {"precio": -1, "comunidad": "madrid"}, loaded=[skill])
    assert not bad.ok
    assert bad.exit_code == 2
    assert "error" in (bad.result or {})
