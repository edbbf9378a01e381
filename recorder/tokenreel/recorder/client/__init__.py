"""The HTTP/SSE client: one streamed request, every read time-stamped, turned into archived chunks."""
