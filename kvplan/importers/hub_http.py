"""HTTP GET with a wall-clock deadline for the whole request and a cap on the body; no retries.

A socket timeout bounds one read, not a request: a server that sends a byte every half second
never trips it. So each request runs on a daemon thread of its own while the caller waits for
the time left, at most; when it runs out the socket is shut down, which ends the read the
thread is in, and the caller gets ``RequestFailed`` at once. A thread still resolving the host
name then holds no socket; it is left behind and ends with the process. Redirects
(``Location``) are followed up to ``MAX_REDIRECTS`` times inside the same deadline, without the
``Authorization`` header once they leave the first host. Bodies are read in chunks and never
past ``limit_bytes``: beyond it the answer is refused (``BodyTooLarge``), or with ``truncate``
cut there (the first bytes of a file whose server ignored the range asked for).

Only ``http://`` and ``https://``; ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY`` are honoured,
and certificates are checked against ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set, else the
``certifi`` bundle when installed (as huggingface_hub's own client does), else the system's.
The body is asked for uncompressed (``Accept-Encoding: identity``), so its cap is its size.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

if TYPE_CHECKING:
    import ssl
    from http.client import HTTPConnection, HTTPResponse
    from urllib.parse import SplitResult

#: Redirects followed for one request (the Hub sends a file to its CDN with one).
MAX_REDIRECTS = 5
_REDIRECTS = (301, 302, 303, 307, 308)
_CHUNK_BYTES = 2**20


class RequestFailed(Exception):
    """No HTTP answer: the connection failed, the time ran out, or the bytes were not HTTP.

    ``reason`` is one short line without the server's bytes."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BodyTooLarge(Exception):
    """The answer's body is longer than ``limit_bytes``; not read past the limit."""

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(f"larger than {limit_bytes:,} B")
        self.limit_bytes = limit_bytes


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer: status, headers (lower-case names, the first of each) and, for a 2xx
    status only, the body (other statuses are not read)."""

    status: int
    headers: dict[str, str]
    body: bytes


def get(
    url: str,
    headers: dict[str, str],
    *,
    timeout_s: float,
    deadline: float,
    limit_bytes: int,
    truncate: bool = False,
) -> Answer:
    """GET ``url`` within ``timeout_s`` seconds of wall clock for the whole request, redirects
    included, and never after ``deadline`` (a ``time.monotonic()`` value).

    Raises RequestFailed (no answer, or no complete one in time) or BodyTooLarge."""
    start = time.monotonic()
    end = min(start + timeout_s, deadline)
    for _ in range(MAX_REDIRECTS + 1):
        answer = _within(_Exchange(url, headers, end, limit_bytes, truncate), end - start)
        location = answer.headers.get("location")
        if answer.status not in _REDIRECTS or not location:
            return answer
        url, headers = _redirected(url, location, headers)
    raise RequestFailed(f"more than {MAX_REDIRECTS} redirects")


def _within(exchange: _Exchange, budget_s: float) -> Answer:
    """The exchange's answer, run on a daemon thread, or RequestFailed when its time is up."""
    worker = threading.Thread(target=exchange.run, name="kvplan-http", daemon=True)
    worker.start()
    if not exchange.done.wait(max(0.0, exchange.end - time.monotonic())):
        exchange.abort()
        raise RequestFailed(f"no complete answer within {budget_s:.1f} s")
    return exchange.outcome()


def _redirected(url: str, location: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The next URL and headers: ``Authorization`` only while scheme, host and port stay."""
    try:
        target = urljoin(url, location.strip())
        old, new = urlsplit(url), urlsplit(target)
        same = (old.scheme, old.hostname, old.port) == (new.scheme, new.hostname, new.port)
    except ValueError:  # a port that is no number, a broken IPv6 address
        raise RequestFailed("redirected to a malformed address") from None
    if new.scheme not in ("http", "https"):
        raise RequestFailed("redirected to an address that is not http:// or https://")
    kept = {k: v for k, v in headers.items() if same or k.lower() != "authorization"}
    return urlunsplit(new._replace(fragment="")), kept


class _Exchange:
    """One request and its answer, on the thread that ``run`` runs on; ``abort`` from any
    other thread ends it."""

    def __init__(
        self, url: str, headers: dict[str, str], end: float, limit_bytes: int, truncate: bool
    ) -> None:
        self.url, self.headers, self.end = url, headers, end
        self.limit_bytes, self.truncate = limit_bytes, truncate
        self.done = threading.Event()
        self._aborted = False
        self._sock: socket.socket | None = None
        self._answer: Answer | None = None
        self._error: Exception | None = None

    def run(self) -> None:
        import http.client

        conn: HTTPConnection | None = None
        response: HTTPResponse | None = None
        try:
            conn, target = _connection(urlsplit(self.url), self._left_s())
            conn.connect()
            self._sock = conn.sock
            if self._aborted:  # the time ran out while connecting: nothing was shut down
                raise RequestFailed("aborted")
            conn.request("GET", target, headers={**self.headers, "Connection": "close"})
            # The answer read here rather than by conn.getresponse(), so that it is closed
            # (and the socket with it) however its reading ends.
            response = http.client.HTTPResponse(conn.sock, method="GET")
            response.begin()
            self._answer = self._read(response)
        except (RequestFailed, BodyTooLarge) as e:
            self._error = e
        except Exception as e:
            self._error = RequestFailed(_reason(e))
        finally:
            if response is not None:
                response.close()
            if conn is not None:
                conn.close()
            self.done.set()

    def abort(self) -> None:
        """Shut the socket down: the read in progress ends, and so does ``run``."""
        self._aborted = True
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):  # the plain socket's shutdown, under TLS too
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def outcome(self) -> Answer:
        if self._answer is None:
            raise self._error or RequestFailed("no answer")
        return self._answer

    def _left_s(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise RequestFailed("no time left")
        return left

    def _read(self, response: HTTPResponse) -> Answer:
        headers: dict[str, str] = {}
        for name, value in response.getheaders():
            headers.setdefault(name.lower(), value)
        body = self._body(response) if 200 <= response.status < 300 else b""
        return Answer(response.status, headers, body)

    def _body(self, response: HTTPResponse) -> bytes:
        """At most ``limit_bytes`` of the body (BodyTooLarge past it, unless ``truncate``),
        each read given only the time left."""
        limit = self.limit_bytes
        if not self.truncate and response.length is not None and response.length > limit:
            raise BodyTooLarge(limit)
        chunks: list[bytes] = []
        num_bytes = 0
        wanted = limit if self.truncate else limit + 1  # one byte more tells "too large"
        while num_bytes < wanted:
            if self._sock is not None:
                self._sock.settimeout(self._left_s())
            chunk = response.read(min(_CHUNK_BYTES, wanted - num_bytes))
            if not chunk:
                break
            chunks.append(chunk)
            num_bytes += len(chunk)
        if num_bytes > limit:
            raise BodyTooLarge(limit)
        return b"".join(chunks)


def _connection(url: SplitResult, timeout_s: float) -> tuple[HTTPConnection, str]:
    """A connection for ``url`` (not yet connected; through a proxy where one is set) and the
    request target to send on it."""
    import http.client

    scheme = url.scheme.lower()
    if scheme not in ("http", "https") or not url.hostname:
        raise RequestFailed("not an http:// or https:// address")
    host, port = url.hostname, url.port or (443 if scheme == "https" else 80)
    target = urlunsplit(("", "", url.path or "/", url.query, ""))
    proxy = _proxy(scheme, host)
    conn: HTTPConnection
    if proxy is None and scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout_s, context=_tls())
    elif proxy is None:
        conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    elif scheme == "https":  # a CONNECT tunnel through the proxy, TLS to the host inside it
        conn = http.client.HTTPSConnection(proxy[0], proxy[1], timeout=timeout_s, context=_tls())
        conn.set_tunnel(host, port, headers=proxy[2])
    else:  # the whole URL to the proxy
        conn = http.client.HTTPConnection(proxy[0], proxy[1], timeout=timeout_s)
        netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        target = urlunsplit((scheme, netloc, url.path or "/", url.query, ""))
    return conn, target


def _proxy(scheme: str, host: str) -> tuple[str, int, dict[str, str]] | None:
    """(host, port, headers) of the proxy for ``scheme`` from the environment, None without."""
    import urllib.request

    address = urllib.request.getproxies().get(scheme)
    if not address or urllib.request.proxy_bypass(host):
        return None
    proxy = urlsplit(address if "://" in address else f"http://{address}")
    if not proxy.hostname:
        return None
    headers = {}
    if proxy.username:
        secret = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}".encode()
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(secret).decode("ascii")
    return proxy.hostname, proxy.port or 80, headers


@functools.cache
def _tls() -> ssl.SSLContext:
    import ssl

    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    if cafile is None and capath is None:
        try:
            import certifi
        except ImportError:
            pass
        else:
            cafile = certifi.where()
    return ssl.create_default_context(cafile=cafile, capath=capath)


def _reason(e: Exception) -> str:
    """One line for a failed exchange, without the bytes the server sent."""
    import http.client

    if isinstance(e, http.client.HTTPException) and not isinstance(e, OSError):
        return f"a malformed HTTP answer ({type(e).__name__})"
    text = " ".join(str(e).split()) if isinstance(e, OSError) else ""
    text = text or type(e).__name__
    return text if len(text) <= 120 else text[:117] + "..."
