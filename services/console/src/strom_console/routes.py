"""Every route of the console in one table: path, handler, methods.

``build_app`` turns each row into a Starlette route (the handler wrapped by
``web.endpoint``); the static files are mounted beside them under ``/static``.
"""

from __future__ import annotations

from typing import NamedTuple

from strom_console.pages import (
    auth,
    groups,
    messages,
    overview,
    schemas,
    search,
    topics,
    transactions,
)
from strom_console.web import Handler

__all__ = ["ROUTES", "PageRoute"]


class PageRoute(NamedTuple):
    path: str
    handler: Handler
    methods: tuple[str, ...] = ("GET",)


_POST = ("POST",)

ROUTES: tuple[PageRoute, ...] = (
    PageRoute("/", overview.page_overview),
    PageRoute("/healthz", overview.healthz),
    PageRoute("/readyz", overview.readyz),
    PageRoute("/fragments/overview", overview.fragment_overview),
    PageRoute("/topics", topics.page_topics),
    PageRoute("/fragments/topics", topics.fragment_topics),
    PageRoute("/topics/new", topics.create_topic, _POST),
    PageRoute("/topics/{name}", topics.page_topic),
    PageRoute("/topics/{name}/configs", topics.alter_config, _POST),
    PageRoute("/topics/{name}/partitions", topics.add_partitions, _POST),
    PageRoute("/topics/{name}/delete", topics.delete_topic, _POST),
    PageRoute("/topics/{name}/elect", topics.elect_leaders, _POST),
    PageRoute("/topics/{name}/reassign", topics.reassign, _POST),
    PageRoute("/topics/{name}/messages", messages.page_messages),
    PageRoute("/topics/{name}/produce", messages.page_produce),
    PageRoute("/topics/{name}/produce", messages.produce, _POST),
    PageRoute("/topics/{name}/search", search.page_search_form),
    PageRoute("/search/start", search.start_search, _POST),
    PageRoute("/search/{job}", search.page_search),
    PageRoute("/fragments/search/{job}", search.fragment_search),
    PageRoute("/search/{job}/stop", search.stop_search, _POST),
    PageRoute("/groups", groups.page_groups),
    PageRoute("/fragments/groups", groups.fragment_groups),
    PageRoute("/groups/{group}", groups.page_group),
    PageRoute("/fragments/groups/{group}", groups.fragment_group),
    PageRoute("/groups/{group}/reset", groups.reset_offsets, _POST),
    PageRoute("/transactions", transactions.page_transactions),
    PageRoute("/transactions/{tid}", transactions.page_transaction),
    PageRoute("/schemas", schemas.page_schemas),
    PageRoute("/schemas/{subject}", schemas.page_subject),
    PageRoute("/login", auth.page_login),
    PageRoute("/login", auth.login, _POST),
    PageRoute("/logout", auth.logout, _POST),
)
