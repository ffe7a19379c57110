"""``palace-conformance fake http``: mempalace 3.11's HTTP transport, plus sessions and faults.

By default the fake answers like ``mempalace serve`` on loopback (FAKE-05), so a bridge cannot
tell them apart: ``POST /mcp`` only, one JSON response per request (200 even for JSON-RPC errors),
202 for notifications and client responses, 400 ``-32700`` for bad JSON or a chunked body, 413 over
16 MiB, ``GET /mcp`` 404, other methods 501, ``GET /healthz`` always open, ``Connection: close``
and ``Content-Length`` on everything. Every route checks Host (403), then Origin (403), then the
bearer token (401, stock HTML, no ``WWW-Authenticate``), then the path (404).

``--sessions`` switches to an SDK-style stateful server (FAKE-07, see ``sessions``). Faults from
the plan fire on the request they match: the HTTP-only ones (``http_status``, ``reset``, ``sse``,
``accept_202``, ``content_type``, ``forget_session``, ``rotate_token``) are decided in
:meth:`FakeHttpServer.answer`; the transport-neutral ones run through ``playback.play`` onto an
:class:`HttpPort`, which turns a lone reply into a JSON body and anything more (server requests,
notifications, progress, duplicates) into a live ``text/event-stream``.

Control API (unless ``--no-control``), same port, Host/Origin checked, no token, journaled as
``control`` records (details in ``control`` and ``docs/fake-control-api.md``)::

    POST   /_fake/faults            arm fault(s); 200 {"armed": [ids]} | 400 {"error": "..."}
    DELETE /_fake/faults            disarm all
    POST   /_fake/sessions/forget   forget all sessions, or {"id": ...}
    POST   /_fake/token             {"token": ...} replaces the bearer token
    GET    /_fake/journal           the journal records as JSON
    POST   /_fake/reset             no faults, no sessions, an empty palace

Journal records added here: ``http_request`` and ``http_response`` (with ``conn``, the
connection number), ``http_closed`` (a connection that ended without a complete response),
``http_dropped`` / ``http_withheld`` (output that had nowhere to go), ``http_decoy`` (an ``sse``
fault's decoy event: ``event``, ``id``), ``http_garbage_event`` (its event of text that is not
JSON: ``id``), ``http_invalid_utf8`` (its comment line of bytes that are not UTF-8),
``http_resumed`` (an ``sse`` fault's withheld reply replayed to a GET carrying
its ``Last-Event-ID``: ``last_event_id``, and the ``status`` that GET got), ``session`` and
``control``.
The token is never written anywhere.
"""
