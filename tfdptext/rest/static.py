"""The web page's files, served compressed and cacheable.

    files = StaticFiles()
    response = files.response(path, mimetype, request)

A file goes out gzip-compressed when the client accepts gzip
(`Accept-Encoding`) and compression saves at least MIN_SAVING of it
(LiteRT.js's wasm, the scripts, the vocabulary and JSON do; the phone
model's float weights barely do), with `Vary: Accept-Encoding`. Every
answer carries a strong ETag (the SHA-256 of what is sent) and
`Cache-Control: no-cache`: a browser keeps the file and asks again each
load, and an unchanged file is answered `304 Not Modified` with no body,
so a second load of the page transfers almost nothing. Files are read and
compressed once per (path, size, modification time), and bytes made by
the server (the manifest the page reads) once per content, then kept in
memory.
"""

import gzip
import hashlib
import os
import threading

from werkzeug.wrappers import Response

# Compression is used only when it saves at least this share of a file.
MIN_SAVING = 0.05
GZIP_LEVEL = 6
CACHE_CONTROL = "no-cache"


class _Entry:
    """One file as sent: its plain and (when worth it) gzip bodies, and
    their ETags."""

    def __init__(self, data):
        self.plain = data
        self.plain_etag = hashlib.sha256(data).hexdigest()[:32]
        packed = gzip.compress(data, GZIP_LEVEL, mtime=0)
        worth = len(packed) <= (1 - MIN_SAVING) * len(data)
        self.gzip = packed if worth else None
        self.gzip_etag = self.plain_etag + "-gzip" if worth else None


class StaticFiles:
    """Answers GET / HEAD for files on disk (compressed, ETag, 304)."""

    def __init__(self):
        self._entries = {}
        self._lock = threading.Lock()

    def _entry(self, path):
        stat = os.stat(path)
        key = (path, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            with open(path, "rb") as f:
                entry = _Entry(f.read())
            self._keep(key, entry)
        return entry

    def response(self, path, mimetype, request):
        """The response for the file at `path` (which must exist)."""
        return self._answer(self._entry(path), mimetype, request)

    def data_response(self, name, data, mimetype, request):
        """The response for `data` (bytes made here, e.g. the manifest
        the page reads), kept under `name` until it changes."""
        key = (name, hashlib.sha256(data).hexdigest())
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            entry = _Entry(data)
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
        compressed = entry.gzip is not None and \
            "gzip" in request.accept_encodings
        body, etag = ((entry.gzip, entry.gzip_etag) if compressed
                      else (entry.plain, entry.plain_etag))
        headers = {"ETag": f'"{etag}"', "Cache-Control": CACHE_CONTROL}
        if entry.gzip is not None:
            headers["Vary"] = "Accept-Encoding"
        if compressed:
            headers["Content-Encoding"] = "gzip"
        if request.if_none_match.contains(etag):
            return Response(status=304, headers=headers)
        response = Response(body if request.method != "HEAD" else b"",
                            mimetype=mimetype, headers=headers)
        response.content_length = len(body)
        return response
