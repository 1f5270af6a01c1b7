"""Transactions: the list (by state) and one transactional id's description."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from strom_console.web import Console


async def page_transactions(console: Console, request: Request) -> Response:
    state = request.query_params.get("state", "")
    listed = await console.admin.list_transactions(states=[state] if state else None)
    return console.render(request, "transactions.html", listed=listed, state=state)


async def page_transaction(console: Console, request: Request) -> Response:
    tid = request.path_params["tid"]
    described = (await console.admin.describe_transactions([tid]))[tid]
    return console.render(request, "transaction.html", t=described, now_ms=int(time.time() * 1000))
