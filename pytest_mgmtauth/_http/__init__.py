"""The transport: HTTP onto one pytest-httpserver server; requests in, domain calls, JSON out."""
