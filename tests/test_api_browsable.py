"""The API in a browser: a root, DRF's browsable pages with a link to the
next page, Swagger UI and ReDoc served offline, readable refusals; and the
JSON a client gets, unchanged by any of it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core import signing
from django.test import Client

from .api_client import LIST_URL, detail_url, next_url
from .inspector_data import make_conversations, make_messages
from .inspector_records import make_forks, make_runs, make_summaries

pytestmark = pytest.mark.django_db

ROOT = "/anvia/api/"
BROWSER_ACCEPT = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
)
_HREF = re.compile(r'href="([^"]+)"[^>]*rel="next"')


def browse(client: Client, url: str, **params: Any) -> Any:
    return client.get(url, params, HTTP_ACCEPT=BROWSER_ACCEPT)


def test_the_root_links_every_endpoint(staff: Client) -> None:
    response = staff.get(ROOT)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    links = response.json()
    assert links["conversations"] == f"http://testserver{LIST_URL}"
    pytest.importorskip("drf_spectacular")
    assert links["schema"] == "http://testserver/anvia/api/schema/"
    assert links["swaggerUi"] == "http://testserver/anvia/api/docs/"
    assert links["redoc"] == "http://testserver/anvia/api/redoc/"
    for url in links.values():
        assert staff.get(url).status_code == 200


def test_the_root_refuses_whom_the_api_refuses(client: Client) -> None:
    assert client.get(ROOT).status_code in (401, 403)


def test_a_browser_gets_the_browsable_page(staff: Client) -> None:
    make_conversations(3, prefix="seen")
    for response in (browse(staff, LIST_URL), staff.get(LIST_URL, {"format": "api"})):
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/html")
        page = response.content.decode()
        assert "seen-2" in page
        assert "Inspector API" in page  # the breadcrumb back to the root


def test_json_clients_get_the_same_json_as_before(
    staff: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Cursors are signed with the second they were made in: the requests
    # compared below may fall in two seconds.
    monkeypatch.setattr(signing.TimestampSigner, "timestamp", lambda self: "1")
    (conversation,) = make_conversations(1, prefix="same")
    make_messages(conversation, 150)
    make_runs(conversation, 60)
    make_forks(conversation, 60)
    make_summaries(conversation, 60)
    detail = detail_url(conversation.ref)
    endpoints = ("", "messages/", "runs/", "lineage/", "summaries/")
    for url in [LIST_URL, *(f"{detail}{endpoint}" for endpoint in endpoints)]:
        plain = staff.get(url)
        for accept in ("application/json", "*/*", "application/json, text/plain, */*"):
            other = staff.get(url, HTTP_ACCEPT=accept)
            assert other["Content-Type"] == "application/json"
            assert other.content == plain.content
            assert other.headers.get("Link") == plain.headers.get("Link")
        assert plain.headers.get("Link"), url  # every one of them has a second page here
        assert staff.get(url, {"format": "json"}).content == plain.content


def test_a_browser_reaches_the_next_page_by_a_link(staff: Client) -> None:
    make_conversations(5, prefix="paged")
    first = browse(staff, LIST_URL, limit=2).content.decode()
    found = _HREF.findall(first)
    assert len(found) == 1
    second_url = found[0].replace("&amp;", "&")
    json_next = next_url(staff.get(LIST_URL, {"limit": 2}))
    assert second_url == json_next
    second = browse(staff, second_url).content.decode()
    assert "paged-2" in second
    assert "paged-4" not in second
    assert 'rel="first"' in second  # and back to the start
    third = browse(staff, _HREF.findall(second)[0].replace("&amp;", "&")).content.decode()
    assert "paged-0" in third
    assert not _HREF.findall(third)  # the last page


def test_message_pages_are_linked_in_the_browser(staff: Client) -> None:
    (conversation,) = make_conversations(1, prefix="talk")
    make_messages(conversation, 120)
    page = browse(staff, detail_url(conversation.ref)).content.decode()
    (following,) = _HREF.findall(page)
    assert "/messages/?after=99" in following


@pytest.mark.parametrize("path", ["schema/", "docs/", "redoc/", "conversations/", ""])
@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        (BROWSER_ACCEPT, "text/html"),
        ("application/vnd.oai.openapi", "application/json"),
        ("application/yaml", "application/json"),
        ("image/png", "application/json"),
        (None, "application/json"),
    ],
)
def test_a_refusal_is_readable_whatever_the_accept_header(
    client: Client, path: str, accept: str | None, content_type: str
) -> None:
    if path in ("schema/", "docs/", "redoc/"):
        pytest.importorskip("drf_spectacular")
    headers = {} if accept is None else {"accept": accept}
    response = client.get(f"/anvia/api/{path}", headers=headers)
    # 406 where the page has no form the client accepts: negotiation comes
    # before the permission check, and refuses no less readably.
    assert response.status_code in (401, 403, 406)
    assert response["Content-Type"].startswith(content_type)
    text = response.content.decode()
    assert "credentials were not provided" in text or "Could not satisfy" in text


def test_the_anonymous_schema_link_is_a_readable_403(client: Client) -> None:
    pytest.importorskip("drf_spectacular")
    for accept in (BROWSER_ACCEPT, "application/vnd.oai.openapi", "*/*"):
        response = client.get("/anvia/api/schema/", HTTP_ACCEPT=accept)
        assert response.status_code == 403
        assert not response["Content-Type"].startswith("application/vnd.oai")


def test_a_refusal_under_a_format_no_error_speaks_is_json(client: Client) -> None:
    pytest.importorskip("drf_spectacular")
    response = client.get("/anvia/api/schema/", {"format": "yaml"})
    assert response.status_code in (401, 403)
    assert response["Content-Type"] == "application/json"


def test_the_schema_still_serves_yaml_and_json(staff: Client) -> None:
    pytest.importorskip("drf_spectacular")
    yaml = staff.get("/anvia/api/schema/")
    assert yaml.status_code == 200
    assert yaml["Content-Type"].startswith("application/vnd.oai.openapi")
    assert staff.get("/anvia/api/schema/", {"format": "json"}).json()["openapi"].startswith("3")


@pytest.mark.parametrize(
    ("path", "asset"),
    [
        ("docs/", "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"),
        ("redoc/", "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"),
    ],
)
def test_the_docs_pages_load_their_scripts_from_this_site(
    staff: Client, path: str, asset: str
) -> None:
    pytest.importorskip("drf_spectacular_sidecar")
    page = browse(staff, f"/anvia/api/{path}")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'src="/static/{asset}"' in html
    assert "/anvia/api/schema/" in html
    assert "https://" not in html  # nothing from a CDN or a font service
