"""The web page's files, served compressed and cacheable.

    files = StaticFiles()
    response = files.response(path, mimetype, request)

A file goes out compressed when the client accepts it (`Accept-Encoding`)
and compression saves at least MIN_SAVING of it: zstd (Zstandard, RFC
8878) where the client accepts it and the `zstandard` package is
installed, else gzip; with `Vary: Accept-Encoding`. Chromium accepts
zstd (also over plain HTTP to 127.0.0.1, measured with Chromium 156). zstd at
ZSTD_LEVEL sends LiteRT.js's 9.4 MB WebAssembly runtime as about 2.1 MB
(gzip: 2.8 MB); files above ZSTD_FAST_ABOVE bytes (a phone model: its
quantized weights compress about as well at level 3 as at 19, in a
hundredth of the time) are compressed at ZSTD_FAST_LEVEL. Every answer
carries a strong ETag (the SHA-256 of the file, suffixed by the
encoding) and `Cache-Control: no-cache`: a browser keeps the file and
asks again each load, and an unchanged file is answered `304 Not
Modified` with no body, so a second load of the page transfers almost
nothing. Files are read and compressed once per (path, size,
modification time), and bytes made by the server (the manifest the page
reads) once per content, then kept in memory.
"""

import gzip
import hashlib
import os
import threading

from werkzeug.wrappers import Response

try:  # Optional: without it, gzip only.
    import zstandard
except ImportError:  # pragma: no cover (installed with tfdptext)
    zstandard = None

# Compression is used only when it saves at least this share of a file.
MIN_SAVING = 0.05
GZIP_LEVEL = 6
# zstd's level 19 keeps an 8 MiB window (windowLog 23), the most that
# browsers decode (RFC 8878 asks decoders for at least 8 MiB).
ZSTD_LEVEL = 19
ZSTD_FAST_LEVEL = 3
ZSTD_FAST_ABOVE = 12 * 2**20
CACHE_CONTROL = "no-cache"
# Preferred first.
ENCODINGS = ("zstd", "gzip")


def zstd_compress(data, level=None):
    """`data` as one zstd frame (content size recorded) at `level`
    (default: ZSTD_LEVEL, or ZSTD_FAST_LEVEL above ZSTD_FAST_ABOVE
    bytes)."""
    if level is None:
        level = ZSTD_FAST_LEVEL if len(data) > ZSTD_FAST_ABOVE else \
            ZSTD_LEVEL
    return zstandard.ZstdCompressor(level=level,
                                    write_content_size=True).compress(data)


class _Entry:
    """One file as sent: its plain body and its compressed bodies worth
    sending ({encoding: body}), with their ETags."""

    def __init__(self, data, zstd_level=None):
        self.plain = data
        self.plain_etag = hashlib.sha256(data).hexdigest()[:32]
        packed = {"gzip": gzip.compress(data, GZIP_LEVEL, mtime=0)}
        if zstandard is not None:
            packed["zstd"] = zstd_compress(data, zstd_level)
        self.bodies = {name: body for name, body in packed.items()
                       if len(body) <= (1 - MIN_SAVING) * len(data)}

    def choose(self, accepted):
        """(body, ETag, encoding or None) for a client accepting
        `accepted` (werkzeug's MIMEAccept of Accept-Encoding)."""
        for name in ENCODINGS:
            if name in self.bodies and accepted[name]:
                return self.bodies[name], f"{self.plain_etag}-{name}", name
        return self.plain, self.plain_etag, None


class StaticFiles:
    """Answers GET / HEAD for files on disk (compressed, ETag, 304).

    Args:
        zstd_level: the zstd level for every file (None: ZSTD_LEVEL, or
            ZSTD_FAST_LEVEL for files above ZSTD_FAST_ABOVE bytes).
    """

    def __init__(self, zstd_level=None):
        if zstd_level is not None and (
                isinstance(zstd_level, bool) or not isinstance(
                    zstd_level, int) or not 1 <= zstd_level <= 19):
            raise ValueError("`zstd_level` must be None or an integer in "
                             f"[1, 19], got {zstd_level!r}.")
        self.zstd_level = zstd_level
        self._entries = {}
        self._lock = threading.Lock()

    def entry(self, path):
        """The file at `path` as sent (read and compressed once)."""
        stat = os.stat(path)
        key = (path, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            with open(path, "rb") as f:
                entry = _Entry(f.read(), self.zstd_level)
            self._keep(key, entry)
        return entry

    def response(self, path, mimetype, request):
        """The response for the file at `path` (which must exist)."""
        return self._answer(self.entry(path), mimetype, request)

    def data_response(self, name, data, mimetype, request):
        """The response for `data` (bytes made here, e.g. the manifest
        the page reads), kept under `name` until it changes."""
        key = (name, hashlib.sha256(data).hexdigest())
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            entry = _Entry(data, self.zstd_level)
            self._keep(key, entry)
        return self._answer(entry, mimetype, request)

    def _keep(self, key, entry):
        """Keeps `entry` under `key`, dropping older ones of its name."""
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items()
                             if k[0] != key[0]}
            self._entries[key] = entry

    @staticmethod
    def _answer(entry, mimetype, request):
        body, etag, encoding = entry.choose(request.accept_encodings)
        headers = {"ETag": f'"{etag}"', "Cache-Control": CACHE_CONTROL}
        if entry.bodies:
            headers["Vary"] = "Accept-Encoding"
        if encoding:
            headers["Content-Encoding"] = encoding
        if request.if_none_match.contains(etag):
            return Response(status=304, headers=headers)
        response = Response(body if request.method != "HEAD" else b"",
                            mimetype=mimetype, headers=headers)
        response.content_length = len(body)
        return response
