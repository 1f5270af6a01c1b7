"""Strom console: a web app that shows and operates a cluster through the public client API.

``strom-console --bootstrap-servers 127.0.0.1:9092`` serves it on http://127.0.0.1:8080
(docs/console.md). Handlers are thin (``app``, ``routes``); what they show and decide is plain
Python: ``topics`` (search, paging, flags), ``overview``, ``messages`` (display formats),
``filters`` (the search expression language), ``lag`` (the lag history), ``charts`` (inline
SVG), ``security`` (sessions, CSRF, login); lag and reset plans are ``strom.group.offsets_plan``,
shared with ``strom groups``.
"""
