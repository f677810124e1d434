"""One rule for file types (issue 36): text or binary is decided on the bytes, by one function.

Push's Content-Type (`content_type_for`), the MCP server's tools and resources (`served`) and
the agent's reads (`fileops.decode_text`) all ask `s3skills.media.file_kind`: UTF-8 text is
text whatever its name, binary is found by content (NUL, signature, not UTF-8), and images,
PDF, audio and video keep the types deepagents 0.7 and MCP hosts expect. The corpus tests
check the rule on every file of the real-skills corpus, and the MCP tools face end to end on
one file of each kind of name.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import mcp_types as types
import pytest
from deepagents.backends.utils import _EXTENSION_TO_FILE_TYPE, _VIDEO_EXTRA_EXTENSIONS
from mcp.client.client import Client

from s3skills.config import Config
from s3skills.errors import BinaryFile, SkillError
from s3skills.fs import fileops
from s3skills.ids import SKILL_FILE
from s3skills.media import MEDIA_EXTENSIONS, content_type_for, file_kind, type_by_name
from s3skills.serve.entries import served
from s3skills.serve.library_source import LibrarySkillSource
from s3skills.serve.server import SkillsServer
from s3skills.skills import SkillLibrary
from s3skills.tenancy import Tenant
from s3skills.testing import MemoryObjectStore
from s3skills.testing.corpus import CorpusNotFound, real_repositories, real_skills_root
from s3skills.transfer import apush_tree

YARA = b'rule MAL_Win_Remcos_Jan25 {\n  strings:\n    $a = "Remcos" ascii\n  condition:\n    $a\n}\n'
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
ZIP = b"PK\x03\x04" + b"\x14\x00" * 20
ANA = Tenant(user_id="ana")
ASCII_PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


@pytest.mark.parametrize(
    ("name", "data", "mime"),
    [
        ("examples/MAL_Win_Remcos_Jan25.yar", YARA, "text/plain"),
        ("main.hcl", b'resource "aws_s3_bucket" "b" {}\n', "text/plain"),
        ("Dockerfile", b"FROM python:3.12\nRUN pip install s3skills\n", "text/plain"),
        ("Makefile", b"all:\n\tpytest\n", "text/plain"),
        ("LICENSE", "Copyright © 2025\n".encode(), "text/plain"),
        ("tool.go", b"package main\n", "text/plain"),
        ("setup.ps1", "\ufeffWrite-Host 'hola'\n".encode(), "text/plain"),
        ("Token.sol", b"pragma solidity ^0.8.0;\n", "text/plain"),
        ("schema.xsd", b'<?xml version="1.0"?><xs:schema/>\n', "text/plain"),
        ("SKILL.md", b"---\nname: x\n---\n", "text/markdown"),
        ("data.json", b"{}", "application/json"),
        ("logo.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml"),
        ("empty", b"", "text/plain"),
        ("notes.bin", "ñandú\n".encode(), "text/plain"),  # a binary-sounding name holding text
    ],
)
def test_utf8_text_is_text_whatever_its_name_on_every_face(name: str, data: bytes, mime: str) -> None:
    kind = file_kind(name, data)
    assert (kind.mime, kind.text) == (mime, True)
    assert content_type_for(name, data) == f"{mime}; charset=utf-8"  # what push stores
    assert served(name, data) == (mime, data.decode("utf-8"))  # what the MCP tools and resources send
    assert fileops.decode_text(data, name) == data.decode("utf-8-sig")  # what the agent reads
    assert fileops.is_text_path(name)


@pytest.mark.parametrize(
    ("name", "data", "mime"),
    [
        ("archive.txt", ZIP, "application/octet-stream"),  # a zip under a text name
        ("picture.md", PNG, "application/octet-stream"),
        ("weights", b"\x00\x01\x02\x03", "application/octet-stream"),  # NUL bytes
        ("latin1.txt", "año".encode("latin-1"), "application/octet-stream"),  # not UTF-8
        ("bundle.zip", ZIP, "application/zip"),  # binary by content, the name's type kept
        ("disguised.py", b"%PDF-1.7\nplain ascii", "application/octet-stream"),  # a signature
    ],
)
def test_binary_is_found_by_content_not_by_name(name: str, data: bytes, mime: str) -> None:
    kind = file_kind(name, data)
    assert (kind.mime, kind.text, kind.media) == (mime, False, False)
    assert content_type_for(name, data) == mime
    assert served(name, data) == (mime, None)
    with pytest.raises(BinaryFile):
        fileops.decode_text(data, name)


@pytest.mark.parametrize(
    ("name", "data", "mime"),
    [
        ("report.pdf", ASCII_PDF, "application/pdf"),  # an all-ASCII PDF is still a PDF
        ("diagram.png", PNG, "image/png"),
        ("clip.MP4", b"\x00\x00\x00\x18ftypmp42", "video/mp4"),
        ("voice.mp3", b"ID3\x04", "audio/mpeg"),
        ("deck.pptx", ZIP, "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    ],
)
def test_media_keep_their_types_as_deepagents_and_mcp_expect(name: str, data: bytes, mime: str) -> None:
    kind = file_kind(name, data)
    assert (kind.mime, kind.text, kind.media) == (mime, False, True)
    assert served(name, data) == (mime, None)
    assert not fileops.is_text_path(name)  # the agent's read sends it base64, as deepagents renders it


def test_the_media_names_are_exactly_those_deepagents_reads_as_multimodal() -> None:
    assert set(MEDIA_EXTENSIONS) == set(_EXTENSION_TO_FILE_TYPE) | set(_VIDEO_EXTRA_EXTENSIONS)


def test_a_partial_read_may_end_inside_a_character_but_a_whole_file_may_not() -> None:
    cut = "naïve ñandú".encode()[:-1]  # the last character's second byte is missing
    assert file_kind("notes", cut, complete=False).text
    assert not file_kind("notes", cut).text


def test_listings_give_the_names_type_or_none() -> None:
    assert type_by_name("a/b/SKILL.md") == "text/markdown"
    assert type_by_name("x.png") == "image/png"
    assert type_by_name("rules.yar") is None  # a listing has no bytes to decide on
    assert type_by_name("Dockerfile") is None


# -- the real-skills corpus ------------------------------------------------------------------


def _corpus_root() -> Path:
    try:
        return real_skills_root()
    except CorpusNotFound as exc:
        pytest.skip(f"needs the real-skills corpus: {exc}")


def _files(root: Path) -> Iterator[Path]:
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                yield path


def _is_utf8_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in data


def test_every_utf8_file_of_the_corpus_is_text_on_every_face_and_every_other_is_not() -> None:
    root = _corpus_root()
    texts = unnamed = binaries = 0
    for path in _files(root):
        data = path.read_bytes()
        rel = path.relative_to(root).as_posix()
        media = PurePosixPath(rel).suffix.lower() in MEDIA_EXTENSIONS
        _, text = served(rel, data)
        if _is_utf8_text(data) and not media:
            texts += 1
            unnamed += type_by_name(rel) is None  # what the old by-name rule sent as a blob
            assert text == data.decode("utf-8"), rel
            assert content_type_for(rel, data).endswith("; charset=utf-8"), rel
            assert fileops.decode_text(data, rel) == data.decode("utf-8-sig"), rel
        else:
            binaries += 1
            assert text is None, rel
            assert not content_type_for(rel, data).endswith("charset=utf-8"), rel
    assert texts > 2000
    assert binaries > 0
    assert unnamed > 100  # .xsd, .hcl, .sentinel, LICENSE, ...: the files issue 36 found as blobs


@pytest.mark.slow
async def test_read_skill_file_returns_text_for_utf8_corpus_files_of_every_kind_of_name() -> None:
    _corpus_root()
    checked: set[str] = set()
    for repo in real_repositories():
        store = MemoryObjectStore()
        report = await apush_tree(store, repo.root, "users/ana/skills/")
        folder_of = {local: sid for sid, local in report.mapping.items()}
        calls: dict[str, tuple[str, str, bytes]] = {}
        for path in sorted(_files(repo.root)):
            rel = path.relative_to(repo.root).as_posix()
            owners = [f for f in folder_of if f == "" or rel.startswith(f + "/")]
            kind = PurePosixPath(path.name).suffix.lower() or path.name
            if owners and path.name != SKILL_FILE and kind not in calls:
                owner = max(owners, key=len)  # the skill that holds it: the deepest skill folder above it
                calls[kind] = (folder_of[owner], rel[len(owner) + 1 :] if owner else rel, path.read_bytes())
        library = SkillLibrary(store, Config())
        skills = SkillsServer(LibrarySkillSource(library), user_id="ana", tools=True)
        async with Client(skills.server) as client:
            for skill_id, inner, data in calls.values():
                try:
                    listed = {f.path for f in await library.afiles(skill_id, tenant=ANA)}
                except SkillError:
                    continue  # a skill push stored disabled or left out
                if inner not in listed:
                    continue  # a file push left out (unsafe, too big) or a nested skill's
                result = await client.call_tool("read_skill_file", {"name": skill_id, "path": inner})
                assert not result.is_error, (skill_id, inner, result.content)
                content = result.content[0]
                suffix = PurePosixPath(inner).suffix.lower()
                if _is_utf8_text(data) and suffix not in MEDIA_EXTENSIONS:
                    assert isinstance(content, types.TextContent), (skill_id, inner)
                    assert content.text == data.decode("utf-8")
                    checked.add(suffix or PurePosixPath(inner).name)
                else:
                    assert not isinstance(content, types.TextContent), (skill_id, inner)
    assert {".xsd", ".hcl", ".sentinel", ".ps1", ".go", "LICENSE"} <= checked
