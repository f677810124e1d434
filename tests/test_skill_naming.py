"""The rule of which skills the MCP skills extension can list (`s3skills.skills.format.naming`), and
the YAML 1.2 reading of frontmatter that the extension's entries carry."""

from __future__ import annotations

import pytest

from s3skills.skills.format.frontmatter import frontmatter_json
from s3skills.skills.format.naming import naming_problem, unservable_reason


@pytest.mark.parametrize("name", ["pdf", "a", "pdf-tools", "x1-2-3", "a" * 64, "0day"])
def test_names_that_follow_the_agent_skills_rules_are_served(name: str) -> None:
    assert naming_problem(name) is None
    assert unservable_reason(f"cat/{name}", name) is None
    assert unservable_reason(name, name) is None


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        ("a" * 65, "65 characters"),
        ("PDF-Tools", "uppercase"),
        ("-21risk-automation", "starts or ends with a hyphen"),
        ("trailing-", "starts or ends with a hyphen"),
        ("a--b", "two hyphens"),
        ("capsule_crm-automation", "'_'"),
        ("café", "'é'"),
        ("two words", "' '"),
    ],
)
def test_names_that_break_the_rules_say_why(name: str, why: str) -> None:
    problem = naming_problem(name)
    assert problem is not None
    assert why in problem
    reason = unservable_reason(f"cat/{name}", name)
    assert reason is not None
    assert reason.startswith(f"its folder {name!r} is not a valid skill name")


def test_a_name_that_differs_from_its_folder_is_not_served_even_when_both_are_valid() -> None:
    assert unservable_reason("tools/pdf-tools", "pdf") == (
        "its name 'pdf' differs from its folder 'pdf-tools'; the skills extension needs them equal"
    )
    assert unservable_reason("tools/pdf", 7) is not None


def test_frontmatter_is_read_as_yaml_1_2_reads_it_not_as_yaml_1_1() -> None:
    text = (
        "---\nname: x\ndescription: d\n"
        "a: yes\nb: 0755\nc: 2024-01-02\nd: 0o17\ne: 1_000\nf: on\ng: ~\nh: 1e3\ni: .5\nj: 0x1F\n"
        "k: +1\nl: -.inf\nm: .NaN\nn: 12:30\no: 1.0\np: 2024-01-02T10:00:00Z\nq:\nr: True\ns: [1, no, NULL]\n"
        "true: key\n<<: merge-is-a-plain-key\n"
        "---\nbody\n"
    )
    assert frontmatter_json(text.encode()) == {
        "name": "x",
        "description": "d",
        "a": "yes",
        "b": 755,
        "c": "2024-01-02",
        "d": 15,
        "e": "1_000",
        "f": "on",
        "g": None,
        "h": 1000.0,
        "i": 0.5,
        "j": 31,
        "k": 1,
        "l": None,
        "m": None,
        "n": "12:30",
        "o": 1.0,
        "p": "2024-01-02T10:00:00Z",
        "q": None,
        "r": True,
        "s": [1, "no", None],
        "true": "key",
        "<<": "merge-is-a-plain-key",
    }
