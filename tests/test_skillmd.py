"""SKILL.md parsing, checking and writing: real-world shapes, hostile input, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3skills.errors import S3SkillsError
from s3skills.skills.format.model import MAX_SKILL_MD_BYTES, InvalidSkill, SkillInfo, SkillMetadata
from s3skills.skills.format.parse import (
    frontmatter_complete,
    frontmatter_prefix,
    get_skill_doc,
    parse_skill_md,
    render_skill_md,
    validate_skill_md,
)

# (case id, SKILL.md text, folder, expected fields, expected body, warning fragments)
LOADS = [
    (
        "minimal",
        "---\nname: pdf\ndescription: Fill and merge PDF forms.\n---\n# PDF\n",
        "pdf",
        {"name": "pdf", "description": "Fill and merge PDF forms."},
        "# PDF\n",
        [],
    ),
    (
        "inline-lists",
        "---\nname: pdf\ndescription: d\ntags: [forms, pdf]\nallowed-tools: [Read, Bash]\n---\nB",
        "pdf",
        {"tags": ["forms", "pdf"], "allowed_tools": ["Read", "Bash"]},
        "B",
        [],
    ),
    (
        "quoted-colon",
        '---\nname: pdf\ndescription: "Use when: the user sends a PDF"\n---\nB',
        "pdf",
        {"description": "Use when: the user sends a PDF"},
        "B",
        [],
    ),
    (
        "unquoted-colon-is-repaired",
        "---\nname: pdf\ndescription: Use when: the user sends a PDF\nlicense: MIT\n---\nB",
        "pdf",
        {"description": "Use when: the user sends a PDF", "license": "MIT"},
        "B",
        ["'description' contains ': '"],
    ),
    (
        "colon-without-space-is-plain-yaml",
        "---\nname: pdf\ndescription: See https://example.com/a for details\n---\nB",
        "pdf",
        {"description": "See https://example.com/a for details"},
        "B",
        [],
    ),
    (
        "folded-description",
        "---\nname: pdf\ndescription: >\n  Fill PDF forms\n  and merge files.\n---\nB",
        "pdf",
        {"description": "Fill PDF forms and merge files."},
        "B",
        [],
    ),
    (
        "literal-description",
        "---\nname: pdf\ndescription: |\n  Line one.\n  Line two.\n---\nB",
        "pdf",
        {"description": "Line one.\nLine two."},
        "B",
        [],
    ),
    (
        "plain-continuation",
        "---\nname: pdf\ndescription: Fill PDF forms\n  and merge files.\n---\nB",
        "pdf",
        {"description": "Fill PDF forms and merge files."},
        "B",
        [],
    ),
    (
        "continuation-with-colon-is-repaired",
        "---\nname: pdf\ndescription: Fill forms\n  when: asked\n---\nB",
        "pdf",
        {"description": "Fill forms when: asked"},
        "B",
        ["contains ': '"],
    ),
    (
        "crlf",
        "---\r\nname: pdf\r\ndescription: d\r\n---\r\n\r\n# T\r\nx\r\n",
        "pdf",
        {"description": "d"},
        "# T\nx\n",
        [],
    ),
    (
        "bom",
        "\ufeff---\nname: pdf\ndescription: d\n---\nB",
        "pdf",
        {"name": "pdf"},
        "B",
        [],
    ),
    (
        "unknown-fields-kept",
        "---\nname: pdf\ndescription: d\nargument-hint: '[file]'\nmodel: fast\n---\nB",
        "pdf",
        {"model_extra": {"argument-hint": "[file]", "model": "fast"}},
        "B",
        [],
    ),
    (
        "uppercase-name-warns-and-loads",
        "---\nname: PDF\ndescription: d\n---\nB",
        "PDF",
        {"name": "PDF"},
        "B",
        ["must be lowercase letters, digits and hyphens"],
    ),
    (
        "name-differs-from-folder",
        "---\nname: pdf-tools\ndescription: d\n---\nB",
        "pdf",
        {"name": "pdf-tools"},
        "B",
        ["name 'pdf-tools' does not match folder 'pdf'"],
    ),
    (
        "missing-name-uses-folder",
        "---\ndescription: d\n---\nB",
        "pdf",
        {"name": "pdf"},
        "B",
        ["using the folder name 'pdf'"],
    ),
    (
        "numbers-and-dates-stay-text",
        "---\nname: pdf\ndescription: d\nversion: 1.10\nreleased: 2025-01-02\nmetadata:\n  rev: 3\n---\n",
        "pdf",
        {"version": "1.10", "metadata": {"rev": "3"}, "model_extra": {"released": "2025-01-02"}},
        "",
        [],
    ),
    (
        "string-lists",
        "---\nname: pdf\ndescription: d\ntags: forms, pdf\ntools_required: read_file write_file,ls\n"
        "allowed-tools: Bash(git add:*) Read, Grep\n---\n",
        "pdf",
        {
            "tags": ["forms", "pdf"],
            "tools_required": ["read_file", "write_file", "ls"],
            "allowed_tools": ["Bash(git add:*)", "Read", "Grep"],
        },
        "",
        [],
    ),
    (
        "seed-fields",
        "---\nname: pdf\ndescription: d\nenabled: false\ncategory: docs\nicon: 📄\nversion: 2\n---\n",
        "pdf",
        {"enabled": False, "category": "docs", "icon": "📄", "version": "2"},
        "",
        [],
    ),
    (
        "only-true-and-false-are-booleans",
        "---\nname: pdf\ndescription: yes\nenabled: no\nflag: true\nmode: on\n---\n",
        "pdf",
        {"description": "yes", "enabled": False, "model_extra": {"flag": True, "mode": "on"}},
        "",
        [],
    ),
    (
        "bad-optional-field-is-ignored",
        "---\nname: pdf\ndescription: d\nenabled: maybe\n---\n",
        "pdf",
        {"enabled": True},
        "",
        ["ignored 'enabled'"],
    ),
    (
        "nested-metadata-value-is-dropped",
        "---\nname: pdf\ndescription: d\nmetadata:\n  author: ana\n  extra: {a: b}\n---\n",
        "pdf",
        {"metadata": {"author": "ana"}},
        "",
        ["metadata 'extra' is not a string"],
    ),
    (
        "long-description-warns",
        "---\nname: pdf\ndescription: " + "x" * 1200 + "\n---\n",
        "pdf",
        {"description": "x" * 1200},
        "",
        ["description is 1200 characters; the limit is 1024"],
    ),
    (
        "leading-blank-lines-before-frontmatter",
        "\n\n---\nname: pdf\ndescription: d\n---\nB",
        None,
        {"name": "pdf"},
        "B",
        [],
    ),
]


@pytest.mark.parametrize(
    ("text", "folder", "fields", "body", "warnings"),
    [case[1:] for case in LOADS],
    ids=[case[0] for case in LOADS],
)
def test_real_world_shapes_load(
    text: str, folder: str | None, fields: dict[str, object], body: str, warnings: list[str]
) -> None:
    parsed = parse_skill_md(text, folder=folder)
    for field, expected in fields.items():
        assert getattr(parsed.metadata, field) == expected, field
    assert parsed.body == body
    assert len(parsed.warnings) == len(warnings), parsed.warnings
    for fragment, warning in zip(warnings, parsed.warnings, strict=True):
        assert fragment in warning


def _deep(n: int) -> str:
    return "---\nname: x\ndescription: d\nm: " + "[" * n + "]" * n + "\n---\n"


SKIPS = [
    ("no-frontmatter", "# Just Markdown\n", "no frontmatter"),
    ("horizontal-rule-is-not-frontmatter", "----\nname: x\n----\n", "no frontmatter"),
    ("unclosed", "---\nname: pdf\ndescription: d\n# Body\n", "not closed"),
    ("missing-description", "---\nname: pdf\n---\nB", "missing required field 'description'"),
    ("blank-description", "---\nname: pdf\ndescription: '  '\n---\nB", "'description': must not be empty"),
    ("null-description", "---\nname: pdf\ndescription:\n---\nB", "missing required field 'description'"),
    ("description-is-a-list", "---\nname: pdf\ndescription: [a]\n---\nB", "'description'"),
    ("name-is-a-mapping", "---\nname: {a: b}\ndescription: d\n---\nB", "'name'"),
    ("list-frontmatter", "---\n- name: pdf\n---\nB", "must be a mapping of fields, not a list"),
    ("scalar-frontmatter", "---\njust text\n---\nB", "must be a mapping of fields, not a str"),
    ("empty-frontmatter", "---\n---\nB", "frontmatter is empty"),
    ("unparseable-yaml", "---\nname: [pdf\ndescription: d\n---\n", "not valid YAML"),
    ("python-tag-refused", "---\nname: !!python/object:os.system x\ndescription: d\n---\n", "not valid YAML"),
    (
        "alias-bomb",
        "---\nname: x\ndescription: d\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9))
        + "---\n",
        "aliases",
    ),
    ("deep-flow-nesting", _deep(20_000), "nested too deeply"),
    ("deep-block-nesting", "---\nname: x\ndescription: d\nm:\n" + "- " * 20_000 + "x\n---\n", "nested too deeply"),
    ("frontmatter-over-64-kib", "---\nname: x\ndescription: " + "d" * 70_000 + "\n---\n", "over 65536 bytes"),
]


@pytest.mark.parametrize(("text", "reason"), [case[1:] for case in SKIPS], ids=[case[0] for case in SKIPS])
def test_broken_shapes_are_skipped_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(InvalidSkill) as info:
        parse_skill_md(text, folder="x")
    assert reason in info.value.reason


def test_missing_name_without_folder_is_skipped() -> None:
    with pytest.raises(InvalidSkill, match="missing required field 'name'"):
        parse_skill_md("---\ndescription: d\n---\n")


def test_invalid_skill_is_a_project_error_and_a_value_error() -> None:
    assert issubclass(InvalidSkill, S3SkillsError)
    assert issubclass(InvalidSkill, ValueError)


def test_file_over_ten_mib_is_refused_without_parsing() -> None:
    data = b"---\nname: x\ndescription: d\n---\n" + b"a" * (11 * 1024 * 1024)
    with pytest.raises(InvalidSkill, match="10 MiB"):
        parse_skill_md(data)
    with pytest.raises(InvalidSkill, match="10 MiB"):
        parse_skill_md(data.decode())
    with pytest.raises(InvalidSkill, match="10 MiB"):
        get_skill_doc(data)


def test_limit_counts_utf8_bytes_of_text() -> None:
    text = "---\nname: x\ndescription: d\n---\n" + "é" * (MAX_SKILL_MD_BYTES // 2 + 1)
    with pytest.raises(InvalidSkill, match="10 MiB"):
        parse_skill_md(text)


def test_invalid_utf8_is_skipped() -> None:
    with pytest.raises(InvalidSkill, match="not valid UTF-8"):
        parse_skill_md(b"---\nname: x\ndescription: caf\xe9\n---\n")


def test_bytes_with_bom_and_crlf_parse_like_text() -> None:
    data = "\ufeff---\r\nname: año\r\ndescription: Ñandú\r\n---\r\nCuerpo".encode()
    parsed = parse_skill_md(data, folder="año")
    assert (parsed.metadata.name, parsed.metadata.description, parsed.body) == ("año", "Ñandú", "Cuerpo")
    assert parsed.warnings == ()


@pytest.mark.parametrize(
    ("text", "doc"),
    [
        ("---\nname: x\ndescription: d\n---\n\n# Title\nText\n", "# Title\nText\n"),
        ("# No frontmatter\r\nText", "# No frontmatter\nText"),
        ("---\nname: x\n# never closed", "---\nname: x\n# never closed"),
        (b"\xef\xbb\xbf---\nname: x\n---\nBody", "Body"),
    ],
    ids=["with-frontmatter", "without-frontmatter", "unclosed", "bytes-with-bom"],
)
def test_get_skill_doc_returns_the_body(text: str | bytes, doc: str) -> None:
    assert get_skill_doc(text) == doc


# --- frontmatter_complete / frontmatter_prefix -----------------------------------------

SKILL = "---\nname: pdf\ndescription: Rellena formularios PDF — también firmas\n---\n# Cuerpo ñ\n".encode()
CLOSE_END = SKILL.index(b"\n---\n") + len(b"\n---\n")


@pytest.mark.parametrize("cut", range(len(SKILL) + 1))
def test_frontmatter_complete_only_once_the_closing_line_is_in(cut: int) -> None:
    head = SKILL[:cut]
    assert frontmatter_complete(head) is (cut >= CLOSE_END)
    prefix = frontmatter_prefix(head)
    if prefix is not None:
        assert prefix == SKILL[:CLOSE_END]
        assert parse_skill_md(prefix).metadata == parse_skill_md(SKILL).metadata


def test_heads_cut_inside_a_multibyte_character_are_safe() -> None:
    cut = SKILL.index("—".encode()) + 1  # inside the 3-byte em dash
    assert frontmatter_complete(SKILL[:cut]) is False
    assert frontmatter_complete(SKILL[: CLOSE_END + len("# Cuerpo ñ".encode()) - 1]) is True


@pytest.mark.parametrize(
    ("head", "complete"),
    [
        (b"---\r\nname: x\r\ndescription: d\r\n---\r\n", True),
        (b"\xef\xbb\xbf---\nname: x\ndescription: d\n---\n", True),
        (b"---\nname: x\ndescription: d\n---", False),  # the line might go on ("----", "--- x")
        (b"---\nname: x\ndescription: d\n----\n", False),
        (b"# no frontmatter\n---\n", False),
        (b"", False),
    ],
    ids=["crlf", "bom", "closing-line-unterminated", "four-dashes", "no-opening", "empty"],
)
def test_frontmatter_complete_edge_cases(head: bytes, complete: bool) -> None:
    assert frontmatter_complete(head) is complete


# --- render_skill_md ---------------------------------------------------------------------

ROUND_TRIPS = [
    SkillMetadata(name="pdf", description="Fill PDF forms."),
    SkillMetadata(
        name="compraventa",
        description='Redacta escrituras de compraventa: inmuebles, fincas y "garajes".\nSegunda línea.',
        license="Apache-2.0",
        compatibility="Needs python3",
        metadata={"author": "ana", "rev": "3"},
        allowed_tools=["Bash(git add:*)", "Read"],
        version="1.10",
        tags=["notaría", "inmuebles"],
        tools_required=["read_file"],
        enabled=False,
        category="escrituras",
        icon="🏠",
    ),
    SkillMetadata.model_validate({"name": "x", "description": "yes", "user-invocable": False, "hint": "[a]"}),
    SkillMetadata(name="y", description="true", version="1.0", allowed_tools=["tool with space"]),
    SkillMetadata.model_validate({"name": "z", "description": "a\x85b\u2028c\rd", "null-extra": None}),
]


@pytest.mark.parametrize(
    "metadata",
    ROUND_TRIPS,
    ids=["minimal", "every-field", "extras", "yaml-lookalikes", "line-break-characters-and-null-extra"],
)
def test_render_round_trips_through_parse(metadata: SkillMetadata) -> None:
    text = render_skill_md(metadata, "# Body\n\nSteps.\n")
    parsed = parse_skill_md(text)
    assert parsed.metadata == metadata
    assert parsed.body == "# Body\n\nSteps.\n"


def test_render_omits_defaults_and_uses_the_allowed_tools_alias() -> None:
    text = render_skill_md(SkillMetadata(name="pdf", description="d", allowed_tools=["Read", "Grep"]), "")
    assert text == "---\nname: pdf\ndescription: d\nallowed-tools: Read Grep\n---\n"


def test_render_rewrites_enabled() -> None:
    parsed = parse_skill_md("---\nname: pdf\ndescription: d\nfoo: bar\n---\nBody\n")
    disabled = parsed.metadata.model_copy(update={"enabled": False})
    again = parse_skill_md(render_skill_md(disabled, parsed.body))
    assert again.metadata.enabled is False
    assert again.metadata.model_extra == {"foo": "bar"}


@given(
    name=st.from_regex(r"[a-z0-9]{1,10}(-[a-z0-9]{1,10}){0,3}", fullmatch=True),
    description=st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=200).filter(
        lambda s: s.strip() == s and s != ""
    ),
    tags=st.lists(st.text("abcñ -_", min_size=1, max_size=8).map(str.strip).filter(bool), max_size=4),
    body=st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\r"), max_size=200).map(
        lambda s: s.lstrip("\n")
    ),
)
def test_render_round_trip_property(name: str, description: str, tags: list[str], body: str) -> None:
    metadata = SkillMetadata(name=name, description=description, tags=tags)
    parsed = parse_skill_md(render_skill_md(metadata, body), folder=name)
    assert parsed.metadata == metadata
    assert parsed.body == body
    assert parsed.warnings == ()


# --- validate_skill_md ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "folder", "expected"),
    [
        ("---\nname: pdf\ndescription: d\n---\nBody", "pdf", []),
        (
            "---\nname: PDF\ndescription: d\n---\nBody",
            "pdf",
            [
                ("error", "name 'PDF' must be lowercase letters, digits and hyphens", False),
                ("error", "name 'PDF' does not match folder 'pdf'", False),
            ],
        ),
        ("---\nname: x\ndescription: d\n---\nBody", "y", [("error", "name 'x' does not match folder 'y'", False)]),
        (
            "---\nname: -pdf\ndescription: d\n---\nBody",
            "-pdf",
            [("error", "name '-pdf' must not start or end with a hyphen", False)],
        ),
        (
            "---\nname: pdf--x\ndescription: d\n---\nBody",
            "pdf--x",
            [("error", "name 'pdf--x' must not contain consecutive hyphens", False)],
        ),
        (
            "---\nname: " + "a" * 65 + "\ndescription: d\n---\nBody",
            None,
            [("error", "name is 65 characters; the limit is 64", False)],
        ),
        (
            "---\nname: pdf\ndescription: " + "d" * 1200 + "\n---\nBody",
            "pdf",
            [("error", "description is 1200 characters; the limit is 1024", False)],
        ),
        (
            "---\nname: pdf\ndescription: d\ncompatibility: " + "c" * 501 + "\n---\nBody",
            "pdf",
            [("error", "compatibility is 501 characters; the limit is 500", False)],
        ),
        (
            "---\nname: pdf\ndescripton: d\n---\nBody",
            "pdf",
            [("error", "missing required field 'description'", True)],
        ),
        (
            "---\nname: pdf\ndescription: d\ncolour: red\n---\n",
            "pdf",
            [
                ("warning", "unknown field 'colour' (kept)", False),
                ("warning", "the body is empty: write the instructions below the frontmatter", False),
            ],
        ),
        (
            "---\nname: pdf\ndescription: d\n---\n" + "line\n" * 600,
            "pdf",
            [("warning", "the body is 600 lines; the advice is 500 at most", False)],
        ),
        ("no frontmatter", "pdf", [("error", "no frontmatter: the file must start with a '---' line", True)]),
    ],
    ids=[
        "clean",
        "uppercase",
        "folder-mismatch",
        "leading-hyphen",
        "double-hyphen",
        "too-long-name",
        "too-long-description",
        "too-long-compatibility",
        "typo-means-missing-description",
        "unknown-field-and-empty-body",
        "long-body",
        "no-frontmatter",
    ],
)
def test_validate_reports_problem_lines(text: str, folder: str | None, expected: list[tuple[str, str, bool]]) -> None:
    problems = validate_skill_md(text, folder=folder)
    assert [(p.level, p.message, p.fatal) for p in problems] == expected


def test_validate_errors_are_the_loader_warnings() -> None:
    text = "---\nname: Bad_Name\ndescription: d\nextra: 1\n---\n"
    errors = [p.message for p in validate_skill_md(text, folder="bad-name") if p.level == "error"]
    assert list(parse_skill_md(text, folder="bad-name").warnings) == errors


# --- SkillInfo ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("skill_id", "category", "expected_leaf", "expected_category"),
    [
        ("pdf", None, "pdf", None),
        ("escrituras/compraventa", None, "compraventa", "escrituras"),
        ("escrituras/compraventa", "notaría", "compraventa", "notaría"),
        ("pdf", "docs", "pdf", "docs"),
    ],
)
def test_skill_info_leaf_and_category(
    skill_id: str, category: str | None, expected_leaf: str, expected_category: str | None
) -> None:
    info = SkillInfo(id=skill_id, metadata=SkillMetadata(name="n", description="d", category=category))
    assert (info.leaf, info.category, info.source, info.etag) == (expected_leaf, expected_category, "user", "")


@given(st.text(alphabet=":-?[]{}!*&ab \n,'\"", max_size=120))
def test_the_cheap_precheck_never_skips_a_frontmatter_the_alias_and_depth_check_refuses(text: str) -> None:
    from s3skills.skills.format import parse

    if parse._FastLoader is None:
        pytest.skip("PyYAML without libyaml: the event check is not used")
    try:
        parse._check_events(text, parse._FastLoader)
    except parse._Refused:
        assert parse._may_refuse(text)
    except Exception:  # not YAML at all: the loader says why, as before
        return


def test_a_deep_block_frontmatter_without_aliases_is_still_refused() -> None:
    nested = "\n".join("  " * i + f"k{i}:" for i in range(70)) + " x"
    with pytest.raises(InvalidSkill, match="nested too deeply"):
        parse_skill_md(f"---\nname: deep\ndescription: d\nextra:\n{nested}\n---\nbody\n")


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_the_sketch_finds_the_same_words_in_ascii_text_either_way(text: str) -> None:
    from s3skills.skills.ranking import sketch

    assert sketch._ASCII_WORD_RE.findall(text) == sketch._WORD_RE.findall(text)
