"""The web console (`s3skills console`): who may sign in and do what, what a page costs,
and that a library's content never runs in the browser. Fast: Starlette's TestClient on
the moto fixture; the real-browser scenario is in tests/test_console_browser.py (slow)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx2
import pytest
from console_harness import CURATOR, READER, OrgConsole, write_skill, write_tokens
from starlette.testclient import TestClient

from s3skills.cli import Settings
from s3skills.console import ConsoleSource, TokenRoles, create_app
from s3skills.storage import RequestCounter

PDF = "---\nname: pdf\ndescription: Fill PDF forms and extract their text.\n---\n# PDF\n\nUse `fill.py`.\n"
HOSTILE = """---
name: evil
description: A skill whose SKILL.md tries everything.
---
# Evil <script>window.pwned = 1; alert(1)</script>

<img src="x" onerror="alert(2)"> <a href="javascript:alert(3)">click</a>
[link](javascript:alert(4)) <iframe src="https://example.org"></iframe>
<style>body { display: none }</style>
<svg onload="alert(5)"><script>alert(6)</script></svg>
<div onclick="alert(7)" style="color:red">hi</div>
"""


@pytest.fixture
def org(moto_endpoint: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> OrgConsole:
    o = OrgConsole(moto_endpoint, bucket, tmp_path, capsys)
    assert o.cli("versioning", "enable")[0] == 0
    write_skill(o.src, "pdf", PDF, {"scripts/fill.py": "print('fill')\n"})
    files: dict[str, str | bytes] = {
        "x.html": "<script>alert(8)</script>",
        "pic.svg": "<svg><script>1</script></svg>",
        "blob.bin": b"\x00\x01\x02",
    }
    write_skill(o.src, "evil", HOSTILE, files)
    o.push()
    return o


def test_a_page_without_a_session_goes_to_the_login_page_and_a_bad_bearer_gets_401(org: OrgConsole) -> None:
    client = org.client(None)
    assert client.get("/").status_code == 303
    assert client.get("/").headers["location"] == "/login"
    assert client.get("/", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/", headers={"Authorization": "Basic abc"}).status_code == 401


def test_login_sets_an_httponly_samesite_strict_cookie_and_a_wrong_token_is_refused(org: OrgConsole) -> None:
    client = org.client(None)
    page = client.get("/login")
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    wrong = client.post("/login", data={"token": "wrong", "csrf": csrf})
    assert wrong.status_code == 303
    assert "error" in wrong.headers["location"]
    good = client.post("/login", data={"token": CURATOR, "csrf": csrf})
    cookie = good.headers["set-cookie"].lower()
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    assert CURATOR not in good.headers["set-cookie"]  # the cookie is signed, not the token
    assert "cora" in client.get("/").text


def test_login_without_its_csrf_token_is_refused(org: OrgConsole) -> None:
    client = org.client(None)
    assert client.post("/login", data={"token": CURATOR}).status_code == 403


def test_a_forged_session_cookie_is_refused(org: OrgConsole) -> None:
    client = org.client(None)
    client.cookies.set("s3skills_console", "eyJ1IjoiY29yYSIsInIiOiJjdXJhdG9yIn0.forged")
    assert client.get("/").status_code == 303


def test_a_bearer_token_works_for_scripts(org: OrgConsole) -> None:
    client = org.client(None)
    got = client.get("/api/skills", headers={"Authorization": f"Bearer {READER}"})
    assert got.status_code == 200
    assert {s["id"] for s in got.json()["skills"]} == {"evil", "pdf"}


def test_a_readers_post_is_refused_and_changes_nothing(org: OrgConsole) -> None:
    client = org.client(READER)
    csrf = org.csrf(client, "/skill?id=pdf")
    assert "Disable" not in client.get("/skill?id=pdf").text  # a reader is not offered the button
    refused = client.post("/disable", data={"id": "pdf", "csrf": csrf})
    assert refused.status_code == 403
    assert "reader" in refused.text
    assert org.source.library.get("pdf").metadata.enabled


def test_a_post_without_or_with_another_sessions_csrf_token_gets_403(org: OrgConsole) -> None:
    client = org.client(CURATOR)
    assert client.post("/disable", data={"id": "pdf"}).status_code == 403
    other = org.client(CURATOR)
    assert client.post("/disable", data={"id": "pdf", "csrf": org.csrf(other)}).status_code == 403
    assert client.post("/disable", data={"id": "pdf", "csrf": "0" * 64}).status_code == 403
    bearer = org.client(None)
    assert (
        bearer.post("/disable", data={"id": "pdf"}, headers={"Authorization": f"Bearer {CURATOR}"}).status_code == 403
    )
    assert org.source.library.get("pdf").metadata.enabled


def test_the_trusted_header_is_taken_only_from_the_proxy_address(org: OrgConsole, tmp_path: Path) -> None:
    client = org.client(None)  # TestClient's peer address is "testclient", not the proxy's
    assert client.get("/", headers={"X-Forwarded-User": "cora"}).status_code == 303
    behind = create_app(org.source, TokenRoles(org.tokens), trusted_user_header="X-Forwarded-User",
                        trusted_proxy="testclient")  # fmt: skip
    proxied = TestClient(behind, follow_redirects=False)
    page = proxied.get("/", headers={"X-Forwarded-User": "cora"})
    assert page.status_code == 200
    assert "curator" in page.text  # cora's role comes from the tokens file
    assert "reader" in proxied.get("/", headers={"X-Forwarded-User": "sso-only-user"}).text
    assert proxied.get("/", headers={"X-Forwarded-User": "../etc"}).status_code == 303
    with pytest.raises(ValueError, match="go together"):
        create_app(org.source, TokenRoles(org.tokens), trusted_user_header="X-Forwarded-User")


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"t": {"user": "ana", "role": "admin"}}, "role"),
        ({"t": {"user": "../x"}}, "user id"),
        ({"t": 3}, "neither"),
        ({"": "ana"}, "empty token"),
        ({}, "JSON object"),
    ],
)
def test_a_bad_tokens_file_is_refused(tmp_path: Path, entries: dict[str, object], message: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(entries))
    path.chmod(0o600)
    with pytest.raises(ValueError, match=message):
        TokenRoles(path)


def test_a_tokens_file_others_may_write_or_a_symlink_is_refused(tmp_path: Path) -> None:
    path = write_tokens(tmp_path / "t.json")
    path.chmod(0o666)
    with pytest.raises(ValueError, match="written by group or others"):
        TokenRoles(path)
    path.chmod(0o600)
    link = tmp_path / "link.json"
    os.symlink(path, link)
    with pytest.raises(ValueError, match=r"symlink|Cannot read"):
        TokenRoles(link)


def test_hostile_markdown_is_sanitized(org: OrgConsole) -> None:
    page = org.client(READER).get("/skill?id=evil")
    assert page.status_code == 200
    markdown = page.text.split('class="markdown">')[1].split("</section>")[0]
    lowered = markdown.lower()
    for bad in ("<script", "onerror", "onload", "onclick", '="javascript:', "<iframe", "<style", "<svg", "style="):
        assert bad not in lowered, bad
    assert "click" in markdown  # the text stays, harmless
    assert "description:" not in markdown  # the frontmatter is not rendered as Markdown


def test_every_page_forbids_inline_script_and_sniffing(org: OrgConsole) -> None:
    page = org.client(READER).get("/")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["x-frame-options"] == "DENY"


def test_files_are_never_served_as_html(org: OrgConsole) -> None:
    client = org.client(READER)
    html = client.get("/raw?id=evil&path=x.html")
    assert html.headers["content-type"].startswith("text/plain")
    assert "sandbox" in html.headers["content-security-policy"]
    svg = client.get("/raw?id=evil&path=pic.svg")
    assert not svg.headers["content-type"].startswith(("text/html", "image/svg"))
    assert svg.headers["content-type"].startswith("text/plain")  # its source, as text: never drawn
    assert "sandbox" in svg.headers["content-security-policy"]
    binary = client.get("/raw?id=evil&path=blob.bin")
    assert binary.headers["content-disposition"].startswith("attachment")
    assert binary.headers["x-content-type-options"] == "nosniff"
    shown = client.get("/file?id=evil&path=x.html")
    assert "<script>alert(8)" not in shown.text
    assert "&lt;" in shown.text  # highlighted, escaped
    assert client.get("/raw?id=evil&path=../pdf/SKILL.md").status_code == 404


def test_the_library_page_lists_skills_with_state_version_and_last_change(org: OrgConsole) -> None:
    page = org.client(READER).get("/")
    assert page.status_code == 200
    _, out, _ = org.cli("--json", "history", "pdf")
    assert json.loads(out)["versions"][0]["version"][:8] in page.text
    assert "pdf" in page.text
    assert "evil" in page.text
    assert "author" in page.text  # who pushed, from the version records
    assert "push" in page.text


def test_search_uses_the_agents_ranker_and_says_why_each_skill_matched(org: OrgConsole) -> None:
    page = org.client(READER).get("/?q=fill+pdf+forms")
    assert "matched:" in page.text
    rows = page.text.split("<tbody>")[1]
    assert "pdf" in rows
    assert "evil" not in rows


def test_the_library_page_paginates(org: OrgConsole) -> None:
    app = create_app(org.source, TokenRoles(org.tokens), page_size=1)
    client = TestClient(app, headers={"Authorization": f"Bearer {READER}"})
    first, second = client.get("/").text, client.get("/?page=2").text
    assert "page 1 of 2" in first
    assert "page 2 of 2" in second
    assert ("skill?id=evil" in first) != ("skill?id=evil" in second)


def test_the_library_page_costs_one_get_of_the_index_when_the_manifest_is_fresh(org: OrgConsole) -> None:
    client = org.client(READER)
    counter = RequestCounter()
    org.source.store.add_request_hook(counter)
    client.get("/")  # the index is read once and cached
    counter.reset()
    org.source.library.index(include_disabled=True)
    assert counter.counts == {"GetObject": 1}  # the manifest, conditional: unchanged


def test_a_skills_version_and_last_change_are_read_once_then_kept(org: OrgConsole) -> None:
    counter = RequestCounter()
    org.source.store.add_request_hook(counter)
    client = org.client(READER)
    counter.reset()
    assert client.get("/").status_code == 200
    # The index (1 GET), the channels (1 LIST: none stored), and for each of the 2 shown skills
    # its newest version record (1 LIST and 1 GET): its version, who, when, which command; and the
    # usage the agents counted (1 LIST per day of the 30, no document stored), kept USAGE_TTL.
    assert counter.counts == {"GetObject": 1 + 2, "ListObjectsV2": 1 + 2 + 30}
    counter.reset()
    assert client.get("/").status_code == 200
    assert counter.counts == {"GetObject": 1, "ListObjectsV2": 1}  # the records and the usage are kept
    # Kept nothing (details_ttl=0): every view reads them again.
    uncached = TestClient(create_app(org.source, TokenRoles(org.tokens), details_ttl=0))
    uncached.headers["Authorization"] = f"Bearer {READER}"
    uncached.get("/")
    counter.reset()
    uncached.get("/")
    assert counter.counts == {"GetObject": 1 + 2, "ListObjectsV2": 1 + 2}


def test_stored_channels_are_read_again_only_when_their_etag_changes(org: OrgConsole) -> None:
    for name in ("staging", "production"):
        assert org.cli("channel", "create", name, "--from", "latest")[0] == 0
    client = org.client(READER)
    page = client.get("/").text
    assert "channels: production, staging" in page
    counter = RequestCounter()
    org.source.store.add_request_hook(counter)
    client.get("/")
    assert counter.counts == {"GetObject": 1, "ListObjectsV2": 1}  # the index; the channels' LIST only
    assert org.cli("channel", "set", "production", "pdf", "--remove")[0] == 0
    counter.reset()
    page = client.get("/").text
    assert counter.counts == {"GetObject": 1 + 1, "ListObjectsV2": 1}  # production changed: read again
    row = page.split("skill?id=pdf")[1].split("</tr>")[0]
    assert "staging" in row
    assert "production" not in row


def test_a_change_made_through_the_console_shows_at_once(org: OrgConsole) -> None:
    client = org.client(CURATOR)
    assert "author" in client.get("/").text
    assert client.post("/disable", data={"id": "pdf", "csrf": org.csrf(client)}).status_code == 303
    row = client.get("/").text.split("skill?id=pdf")[1].split("</tr>")[0]
    assert "cora" in row
    assert "disable" in row


def test_the_console_command_refuses_a_bad_tokens_file_or_a_header_without_its_proxy(
    org: OrgConsole, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from s3skills.cli import main

    loose = write_tokens(tmp_path / "loose.json")
    loose.chmod(0o644 | 0o022)
    assert main([*org.base, "console", "--port", "0", "--tokens", str(loose)]) == 1
    # the line wraps at 200 characters, where depends on the temporary path's length (pytest-N)
    assert "chmod 600" in " ".join(capsys.readouterr().err.split())
    argv = [*org.base, "console", "--port", "0", "--tokens", str(org.tokens), "--trusted-user-header", "X-User"]
    assert main(argv) == 2
    assert "go together" in capsys.readouterr().err
    assert main([*org.base, "console", "--tokens", str(tmp_path / "missing.json")]) == 1
    assert "Cannot read the tokens file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("sid", "category"),
    [("pdf", None), ("escrituras/compraventa", None), ("a/b", "ops")],
)
def test_the_library_pages_category_is_the_skills_own(sid: str, category: str | None) -> None:
    from s3skills.console.views import category_of as _category
    from s3skills.skills import SkillInfo, SkillMetadata

    skill = SkillInfo(sid, SkillMetadata(name=sid.rsplit("/", 1)[-1], description="d", category=category))
    assert _category(skill) == skill.category


def test_the_library_is_sorted_and_filtered_once_per_version_of_its_index(org: OrgConsole) -> None:
    client = org.client(CURATOR)
    views = org.app.state.console.views
    assert client.get("/").status_code == 200
    built = views.builds
    for path in ("/", "/?page=2", "/?state=enabled", "/?state=disabled&problems=1", "/?category=none", "/"):
        assert client.get(path).status_code == 200
    assert views.builds == built  # every skill's category, the problems, the filters: once
    assert client.post("/disable", data={"id": "pdf", "csrf": org.csrf(client)}).status_code == 303
    disabled = client.get("/?state=disabled").text.split("<tbody>")[1]
    assert views.builds == built + 1  # the change made a new index: a new view
    assert "skill?id=pdf" in disabled
    assert "skill?id=evil" not in disabled
    write_skill(org.src, "later", PDF.replace("name: pdf", "name: later"))
    org.push()
    org.source.library.invalidate()  # as when the index's TTL passes
    assert "skill?id=later" in client.get("/").text
    assert views.builds == built + 2


def test_a_console_that_keeps_no_library_view_builds_one_at_every_view(org: OrgConsole) -> None:
    app = create_app(org.source, TokenRoles(org.tokens), library_views=0)
    client = TestClient(app, headers={"Authorization": f"Bearer {READER}"})
    for _ in range(3):
        assert "skill?id=pdf" in client.get("/").text
    assert app.state.console.views.builds == 3
    with pytest.raises(ValueError, match="library_views"):
        create_app(org.source, TokenRoles(org.tokens), library_views=-1)


ODD_FILTERS = ["state=%00", "category=%3Cscript%3E", "problems=yes&state=enabled"]
ODD_FILTERS += ["page=-3", "page=99999999999", "q=%00%ff"]


def test_odd_filters_show_an_empty_or_whole_library_and_never_fail(org: OrgConsole) -> None:
    # One library for every query, each from a new session (they only read it): building the
    # library cost ~0.5 s a case when each query was a test of its own.
    for query in ODD_FILTERS:
        page = org.client(READER).get(f"/?{query}")
        assert page.status_code == 200, query
        assert "<script>" not in page.text.split("<tbody>")[0].split('name="category"')[1], query


SECURITY_HEADERS = ("content-security-policy", "x-content-type-options", "referrer-policy", "x-frame-options")


def _assert_secured(response: httpx2.Response) -> None:
    for name in SECURITY_HEADERS:
        assert name in response.headers, (response.request.url, response.status_code, name)
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    csp = response.headers["content-security-policy"]
    if "sandbox" not in csp:  # a page's policy; a file's own one is stricter (it runs nothing)
        assert "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]


def test_every_response_carries_the_security_headers_errors_and_static_files_included(org: OrgConsole) -> None:
    client = org.client(READER)
    anonymous = org.client(None)
    for response in (
        client.get("/"),
        client.get("/static/console.css"),
        client.get("/static/highlight.css"),
        client.get("/static/missing.css"),  # 404 from the static files
        client.get("/no-such-page"),  # 404 from the router
        client.get("/skill?id=nope"),  # the console's own 404 page
        client.get("/raw?id=evil&path=x.html"),  # a file: its own sandboxing policy
        client.post("/disable", data={"id": "pdf"}),  # 403: no CSRF token
        client.put("/"),  # 405
        anonymous.get("/"),  # 303 to the login page
        anonymous.get("/login"),
        anonymous.get("/healthz"),
        anonymous.get("/readyz"),
        anonymous.get("/", headers={"Authorization": "Bearer nope"}),  # 401
    ):
        _assert_secured(response)


def test_an_exception_escaping_the_app_gets_a_plain_500_with_the_security_headers() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Route

    from s3skills.console.web import SecurityHeaders

    def broken(_request: object) -> None:
        raise RuntimeError("a bug")

    app = Starlette(routes=[Route("/", broken)])
    app.add_middleware(SecurityHeaders)
    response = TestClient(app, raise_server_exceptions=False).get("/")
    assert response.status_code == 500
    assert response.text == "internal error"  # nothing of the exception is shown
    _assert_secured(response)


def test_a_library_that_cannot_be_read_gets_a_503_page_saying_why(moto_endpoint: str, tmp_path: Path) -> None:
    source = ConsoleSource(Settings(bucket="no-such-bucket-here", shared="org", endpoint_url=moto_endpoint))
    client = TestClient(create_app(source, TokenRoles(write_tokens(tmp_path / "t.json"))))
    page = client.get("/", headers={"Authorization": f"Bearer {READER}"})
    assert page.status_code == 503
    assert page.text.startswith("cannot read the library:")
    _assert_secured(page)
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert "cannot read the bucket" in ready.text
    assert client.get("/healthz").status_code == 200  # alive: only readiness takes it out


def test_health_and_readiness_answer_without_a_session_and_cost_one_list_per_ttl(org: OrgConsole) -> None:
    client = org.client(None)
    counter = RequestCounter()
    org.source.store.add_request_hook(counter)
    assert client.get("/healthz").text == "ok\n"
    assert counter.counts == {}  # alive: nothing asked
    for _ in range(5):
        ready = client.get("/readyz")
        assert (ready.status_code, ready.text) == (200, "ready\n")
    assert counter.counts == {"ListObjectsV2": 1}  # one bucket check answers every probe within its TTL
    assert org.app.state.readiness.checks == 1
    assert client.post("/readyz").status_code == 405
    org.app.state.readiness.draining = True  # SIGTERM: balancers stop sending
    assert (client.get("/readyz").status_code, client.get("/readyz").text) == (503, "draining\n")
    assert client.get("/healthz").status_code == 200
