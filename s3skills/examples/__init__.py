"""The bundled example library: Spanish notarial skills used by the demo and the seeders.

`LIBRARY` is a folder laid out as a user's library is in S3, one or two levels of
folders holding a `SKILL.md`::

    escrituras/compraventa/     SKILL.md, disclosure_clausulas.md, resources/ejemplo.md,
                                resources/plantilla.pdf
    escrituras/hipoteca/        SKILL.md, references/ley-5-2019.md
    contratos/arrendamiento/    SKILL.md, references/ley-arrendamientos-urbanos.md
    calculos/impuestos-transmision/
                                SKILL.md, scripts/calcular_itp.py

Push it with `s3skills.sync.apush_tree(store, LIBRARY, "ana/skills/")`, or with
`s3skills.seed.seed_example_library(store, "ana")`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["LIBRARY", "skill_ids"]


def _library_path() -> Path:
    """The library folder as a real path (package data of an installed or source tree)."""
    root = resources.files(__name__) / "library"
    if isinstance(root, Path):
        return root
    # A zip import: the package data has no path of its own. s3skills is never
    # installed as a zip (setuptools unpacks it), so this is only a safety net.
    return Path(__file__).resolve().parent / "library"


LIBRARY: Path = _library_path()
"""The folder of the example library (package data)."""


def skill_ids() -> list[str]:
    """The ids of the bundled skills (`escrituras/compraventa`, ...), sorted."""
    found = {
        path.parent.relative_to(LIBRARY).as_posix()
        for pattern in ("*/SKILL.md", "*/*/SKILL.md")
        for path in LIBRARY.glob(pattern)
    }
    return sorted(found)
