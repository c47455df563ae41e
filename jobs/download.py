"""One URL's bytes into a local file, for `models fetch` (jobs/models.py): where it may connect,
through what, and for how long. The only module of the tool that opens a network connection.

Where. The first URL is https, or plain http to this machine's loopback (a local mirror, the
tests' server). Each host name is resolved here once and the connection is made to the address
that was checked, never to the name again (a DNS answer cannot change between the check and the
connect). A plain http URL must resolve to loopback addresses only ("localhost" that answers
another address is refused).

Redirects. At most MAX_HOPS, each checked as the first URL was not: the new URL must be https and
every address its host resolves to must be public (not loopback, private, link-local, shared
(100.64/10), multicast, reserved or unspecified; an IPv4-mapped IPv6 address is judged as the IPv4
address it holds). One exception, decided so a user's own server can move its files about: a
redirect within the origin of the first URL (same scheme, host and port) is followed as that URL
would be, so a local http mirror may redirect inside itself, and nowhere else.

Proxies as pip takes them from the environment: https_proxy (http_proxy for http URLs), else
all_proxy, each in lower case before upper case, and no_proxy to bypass them (urllib's reading of
those variables, which pip's requests uses too). Never for a loopback address, whatever no_proxy
says. An https URL goes through an http:// proxy as a CONNECT tunnel (the proxy connects; TLS is
still checked against the host name). A redirect target is resolved and checked here first even
then; one that cannot be resolved here is refused.

Time. Each connect and read has TIMEOUT_S. Besides, the whole transfer (redirects included) has a
floor on its rate: by GRACE_S + got / MIN_RATE seconds from its start more than `got` bytes must
have come; a watchdog closes the connection when the transfer is late, so a server that trickles
a byte a second (in its headers too) is cut off after about GRACE_S. $PHOENIX_KEYPOINTS_FETCH_MIN_RATE
(bytes per second) and $PHOENIX_KEYPOINTS_FETCH_GRACE (seconds) change them (a slow link; the
tests). Content-Length is read only as ASCII digits.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import ipaddress
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import IO, Any

TIMEOUT_S = 30.0  # each connect and each read
MAX_HOPS = 5  # redirects followed
MIN_RATE_ENV, GRACE_ENV = "PHOENIX_KEYPOINTS_FETCH_MIN_RATE", "PHOENIX_KEYPOINTS_FETCH_GRACE"
MIN_RATE = 32 * 1024  # bytes per second, averaged over the transfer after the grace
GRACE_S = 60  # seconds before the floor applies (connects, redirects, a slow start)
CHUNK = 2**20
LOOPBACK_NAMES = ("127.0.0.1", "::1", "localhost")
_REDIRECTS = (301, 302, 303, 307, 308)
_DIGITS = re.compile(r"[0-9]{1,18}")


class DownloadFailed(Exception):
    """The transfer did not succeed (no network, an HTTP error, a refused redirect, too slow):
    worth another try, or a fetch by hand. The message is the reason, safe to print."""


class Refused(Exception):
    """The server's answer is refused as it stands (a Content-Length that is no number, more
    bytes than the cap): the message says why."""


def first_url_problem(url: str) -> str | None:
    """Why a URL may not be the first of a fetch, or None: https, or http to loopback."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname in LOOPBACK_NAMES:
        return None
    return f"{url} is not https (only https, or http on 127.0.0.1, is fetched)"


# --- addresses ---------------------------------------------------------------------------------------
def _kind(address: str) -> str:
    """'public', or what else an address is (loopback, private, link-local ...)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind, test in (("loopback", ip.is_loopback), ("link-local", ip.is_link_local),
                       ("multicast", ip.is_multicast), ("unspecified", ip.is_unspecified),
                       ("reserved", ip.is_reserved),
                       ("shared", ip in ipaddress.ip_network("100.64.0.0/10")),
                       ("private", ip.is_private), ("not global", not ip.is_global)):
        if test:
            return kind
    return "public"


def _resolve(host: str, port: int) -> list[str]:
    """Every address a host name resolves to (an address stays itself)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise DownloadFailed(f"{host} cannot be resolved ({e})") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _checked_address(parts: urllib.parse.SplitResult, rule: str) -> str:
    """The address to connect to, every one the host resolves to checked by `rule`: 'loopback'
    (a plain http URL), 'public' (a redirect) or 'any' (the user's own https URL)."""
    host, port = str(parts.hostname), _port(parts)
    addresses = _resolve(host, port)
    kinds = {a: _kind(a) for a in addresses}
    if rule == "loopback" and any(k != "loopback" for k in kinds.values()):
        raise DownloadFailed(f"{host} resolves to {', '.join(addresses)}, not only to this "
                             "machine's loopback: plain http is fetched from loopback only")
    bad = [f"{a} ({k})" for a, k in kinds.items() if k != "public"]
    if rule == "public" and bad:
        said = f"is {kinds[host]}" if list(kinds) == [host] else f"resolves to {', '.join(bad)}"
        raise DownloadFailed(f"{host} {said}: a redirect is followed only to public addresses")
    return addresses[0]


def _port(parts: urllib.parse.SplitResult) -> int:
    try:
        port = parts.port
    except ValueError:
        raise DownloadFailed(f"{parts.netloc} has no valid port") from None
    return port or (443 if parts.scheme == "https" else 80)


# --- proxies -----------------------------------------------------------------------------------------
def _proxy(parts: urllib.parse.SplitResult, loopback: bool) -> urllib.parse.SplitResult | None:
    """The proxy this URL goes through, as pip would choose it from the environment, or None
    (never for loopback)."""
    if loopback:
        return None
    proxies = urllib.request.getproxies_environment()
    if urllib.request.proxy_bypass_environment(str(parts.hostname), proxies):
        return None
    url = proxies.get(parts.scheme) or proxies.get("all")
    if not url:
        return None
    proxy = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
    if proxy.scheme != "http" or not proxy.hostname:
        raise DownloadFailed(f"the proxy {proxy.scheme}://{proxy.hostname} (from the environment) "
                             "is not an http:// proxy, the only kind this fetch speaks through")
    return proxy


def _proxy_headers(proxy: urllib.parse.SplitResult) -> dict[str, str]:
    if proxy.username is None:
        return {}
    user = urllib.parse.unquote(proxy.username) + ":" + urllib.parse.unquote(proxy.password or "")
    return {"Proxy-Authorization": "Basic " + base64.b64encode(user.encode()).decode()}


# --- connections -------------------------------------------------------------------------------------
def _pinned(address: str) -> Callable[..., socket.socket]:
    """socket.create_connection to `address` whatever host name the connection holds (TLS is
    still checked against the name)."""
    def create(where: tuple[str, int], timeout: Any = None, source: Any = None) -> socket.socket:
        return socket.create_connection((address, where[1]), timeout, source)
    return create


def _connection(parts: urllib.parse.SplitResult, rule: str) -> http.client.HTTPConnection:
    """A connection to the URL's host: to the checked address, or through the proxy."""
    host, port = str(parts.hostname), _port(parts)
    literal_loopback = host in LOOPBACK_NAMES
    try:
        address = _checked_address(parts, rule)
    except DownloadFailed:
        proxy = _proxy(parts, literal_loopback)
        if rule != "any" or proxy is None:  # the proxy may resolve what this machine cannot
            raise
        return _tunnel(parts, proxy)
    proxy = _proxy(parts, literal_loopback or _kind(address) == "loopback")
    if proxy is not None and parts.scheme == "https":
        return _tunnel(parts, proxy)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    extra = {"context": ssl.create_default_context()} if parts.scheme == "https" else {}
    conn = cls(host, port, timeout=TIMEOUT_S, **extra)
    conn._create_connection = _pinned(address)  # type: ignore[attr-defined]
    return conn


def _tunnel(parts: urllib.parse.SplitResult, proxy: urllib.parse.SplitResult
            ) -> http.client.HTTPConnection:
    if parts.scheme != "https":
        raise DownloadFailed("plain http goes to loopback only, never through a proxy")
    conn = http.client.HTTPSConnection(str(proxy.hostname), proxy.port or 80, timeout=TIMEOUT_S,
                                       context=ssl.create_default_context())
    conn.set_tunnel(str(parts.hostname), _port(parts), headers=_proxy_headers(proxy))
    return conn


# --- the transfer ------------------------------------------------------------------------------------
def _setting(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    if not value:
        return default
    if not _DIGITS.fullmatch(value) or int(value) < 1:
        raise Refused(f"${name} must be a whole number above 0 (ASCII digits), not {value!r}")
    return int(value)


class _Deadline:
    """The floor on the transfer's rate, kept by a watchdog thread that shuts the connection's
    socket when the transfer falls behind (a read waiting on a trickle returns then)."""

    def __init__(self) -> None:
        self.rate, self.grace = _setting(MIN_RATE_ENV, MIN_RATE), _setting(GRACE_ENV, GRACE_S)
        self.start, self.got, self.late = time.monotonic(), 0, False
        self.conn: http.client.HTTPConnection | None = None
        self._done = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def due(self) -> float:
        return self.start + self.grace + self.got / self.rate

    def _watch(self) -> None:
        while not self._done.wait(0.2):
            if time.monotonic() > self.due():
                self.late = True
                sock = getattr(self.conn, "sock", None)
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return

    def check(self) -> None:
        if self.late or time.monotonic() > self.due():
            self.late = True
            raise DownloadFailed(self.why())

    def why(self) -> str:
        took = time.monotonic() - self.start
        return (f"too slow: {self.got} bytes in {took:.0f} s, below the floor of {self.rate} bytes "
                f"a second after {self.grace} s (${MIN_RATE_ENV}, ${GRACE_ENV} change it)")

    def close(self) -> None:
        self._done.set()


def _hop_problem(url: str, first: urllib.parse.SplitResult) -> tuple[str | None, str]:
    """(why a redirect to url is not followed, or None; the address rule it is connected by)."""
    parts = urllib.parse.urlsplit(url)
    same = (parts.scheme, parts.hostname, parts.port) == (first.scheme, first.hostname, first.port)
    if same:
        return None, _first_rule(first)
    if parts.scheme != "https" or not parts.hostname:
        return f"redirected to {url}, which is not https: not followed", "public"
    return None, "public"


def _first_rule(parts: urllib.parse.SplitResult) -> str:
    return "loopback" if parts.scheme == "http" else "any"


def _open(url: str, deadline: _Deadline) -> tuple[http.client.HTTPConnection, Any, str]:
    """(connection, 200 response, final URL), redirects followed by the rules above."""
    first = urllib.parse.urlsplit(url)
    rule = _first_rule(first)
    for _hop in range(MAX_HOPS + 1):
        parts = urllib.parse.urlsplit(url)
        conn = _connection(parts, rule)
        deadline.conn = conn
        target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        conn.request("GET", target, headers={"User-Agent": "phoenix-keypoints",
                                             "Accept-Encoding": "identity"})
        response = conn.getresponse()
        deadline.check()
        if response.status not in _REDIRECTS:
            if response.status != 200:
                conn.close()
                raise DownloadFailed(f"HTTP Error {response.status}: {response.reason}")
            return conn, response, url
        location = response.getheader("Location") or ""
        conn.close()
        url = urllib.parse.urljoin(url, location)
        why, rule = _hop_problem(url, first)
        if why:
            raise DownloadFailed(why)
    raise DownloadFailed(f"more than {MAX_HOPS} redirects")


def announced(response: Any) -> int | None:
    """The Content-Length the server announced: ASCII digits only, else refused."""
    value = response.getheader("Content-Length")
    if value is None:
        return None
    if not _DIGITS.fullmatch(value.strip(" \t")):
        raise Refused(f"the server announced a Content-Length of {value!r}, not a number of bytes "
                      "(ASCII digits): refused, nothing kept")
    return int(value)


def download(url: str, out: IO[bytes], cap: int,
             start: Callable[[int | None], Callable[[int], None]]) -> int:
    """url's body into out, at most cap bytes, all that the server announced; `start(length)`
    gives the progress step. Raises DownloadFailed (try again) or Refused (the answer)."""
    why = first_url_problem(url)
    if why:
        raise Refused(f"{why}: not fetched")
    deadline = _Deadline()
    conn = None
    try:
        conn, response, _ = _open(url, deadline)
        length = announced(response)
        if length is not None and length > cap:
            raise Refused(f"{length} bytes announced, more than the {cap} this project accepts "
                          "for it: refused, nothing kept")
        got = _copy(response, out, cap, deadline, start(length))
        deadline.check()  # a connection the watchdog shut reads as its end
    except (OSError, ValueError, http.client.HTTPException) as e:
        raise DownloadFailed(deadline.why() if deadline.late else _reason(e)) from None
    finally:
        deadline.close()
        if conn is not None:
            conn.close()
    if length is not None and got != length:
        raise DownloadFailed(f"{got} of the {length} bytes announced arrived (truncated)")
    return got


def _copy(response: Any, out: IO[bytes], cap: int, deadline: _Deadline,
          step: Callable[[int], None]) -> int:
    while block := response.read1(CHUNK):
        deadline.got += len(block)
        if deadline.got > cap:
            raise Refused(f"more than the {cap} bytes this project accepts for it: refused, "
                          "nothing kept")
        out.write(block)
        step(len(block))
        deadline.check()
    return deadline.got


def _reason(e: Exception) -> str:
    if isinstance(e, http.client.IncompleteRead):
        return f"truncated ({len(e.partial)} bytes, then the connection closed)"
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"its TLS certificate is not valid for it ({e.verify_message})"
    return str(getattr(e, "strerror", None) or getattr(e, "reason", None) or e)
