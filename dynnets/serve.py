"""``dynnets serve``: a local page to try sentences in, and a JSON endpoint.

``GET /`` is a page with a text box; on submit it shows the sentence's tree,
each node coloured by its predicted class (:func:`dynnets.plots.tree_svg`),
and the root's prediction with its probabilities. ``POST /predict`` takes
JSON and answers with what ``dynnets predict --json`` prints for the same
input: a list with one record per sentence.

Request body (``Content-Type: application/json``)::

    {"text": "it is not good ."}                 # or "sentences": ["...", ...]
    {"text": "...", "nodes": true}               # per-node predictions, as --nodes
    {"text": "...", "binarize": "right"}         # as --binarize
    {"text": "...", "svg": true}                 # each record also gets "svg": the tree picture
    {"text": "...", "svg": true, "picture_text": true}     # as --picture-text

Every bad request is answered with a status and ``{"error": "<one line>"}``,
and the server goes on serving: 400 for malformed JSON, an empty sentence,
a tree with a bad label and the like (the same one-line reasons as
``dynnets predict``), 404 for an unknown path, 405 for another method, 408
for a body that does not arrive within the timeout, 411 without a
Content-Length, 413 for a body over ``max_bytes`` (it is not read) or a
sentence over ``max_words``, 415 for a body that is not
``application/json``.

The log (standard error, unless ``--quiet``) has one line per connection:
``127.0.0.1:50312 - "POST /predict HTTP/1.0" 400 <reason>``, written once the
answer is sent; when the client went away first (a body cut short, a
connection closed before the answer was read) or timed out, the line ends
``[not sent: the client closed the connection]`` or says so; never a
traceback.

The model is loaded once. Its forward is not safe to run from two threads at
once (the per-node prediction switches the model's execution mode, and the
BLAS thread limit is process-wide), so requests are parsed, checked and drawn
in their own threads and take turns for the forward pass under one lock.
The server binds to 127.0.0.1 unless told otherwise, answers each request on
its own connection (HTTP/1.0) with a socket timeout, and stops on Ctrl-C
(SIGINT) or SIGTERM after the requests in flight are answered.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["PredictionService", "RequestError", "make_server", "serve", "PAGE", "MAX_BYTES", "MAX_WORDS",
           "MAX_SENTENCES"]

#: Largest request body read (bytes); a larger Content-Length is answered 413 without reading it.
MAX_BYTES = 64 * 1024
#: Most words in one sentence (the per-node JSON of a deep tree grows with depth times length).
MAX_WORDS = 400
#: Most sentences in one request.
MAX_SENTENCES = 32

_FIELDS = ("text", "sentences", "nodes", "svg", "binarize", "picture_text")


class RequestError(Exception):
    """A request the service refuses: an HTTP status and a one-line reason."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = int(status)
        self.reason = " ".join(str(reason).split())


class PredictionService:
    """What ``POST /predict`` runs, apart from HTTP: checks a request and predicts it.

    Parameters
    ----------
    model
        A model from :func:`dynnets.train.load_checkpoint` (with ``vocab``).
    max_words, max_sentences : int
        Limits per sentence and per request.
    blas_threads : int
        As ``dynnets predict --blas-threads``.
    """

    def __init__(self, model, max_words=MAX_WORDS, max_sentences=MAX_SENTENCES, blas_threads=1):
        from .predictions import is_tree_model
        if getattr(model, "vocab", None) is None:
            raise ValueError("PredictionService: the model has no vocabulary (load it with "
                             "dynnets.train.load_checkpoint)")
        self.model = model
        self.tree_model = is_tree_model(model)
        self.max_words = int(max_words)
        self.max_sentences = int(max_sentences)
        self.blas_threads = blas_threads
        self._lock = threading.Lock()

    def parse(self, body):
        """The request's options from a decoded JSON body; raises :class:`RequestError` (400)."""
        if not isinstance(body, dict):
            raise RequestError(400, f"expected a JSON object such as {{\"text\": \"it is good .\"}}, got "
                                    f"{type(body).__name__}")
        unknown = [k for k in body if k not in _FIELDS]
        if unknown:
            raise RequestError(400, f"unknown field {unknown[0]!r} (fields: {', '.join(_FIELDS)})")
        if ("text" in body) == ("sentences" in body):
            raise RequestError(400, "give either \"text\" (one sentence) or \"sentences\" (a list), not "
                                    + ("both" if "text" in body else "neither"))
        if "text" in body:
            sentences = [body["text"]]
            if not isinstance(body["text"], str):
                raise RequestError(400, f"\"text\" must be a string, got {_json_type(body['text'])}")
        else:
            sentences = body["sentences"]
            if not isinstance(sentences, list) or not sentences:
                raise RequestError(400, "\"sentences\" must be a non-empty list of strings")
            for i, s in enumerate(sentences, 1):
                if not isinstance(s, str):
                    raise RequestError(400, f"sentence {i} must be a string, got {_json_type(s)}")
            if len(sentences) > self.max_sentences:
                raise RequestError(413, f"{len(sentences)} sentences; this server takes at most "
                                        f"{self.max_sentences} per request")
        opts = {}
        for key in ("nodes", "svg", "picture_text"):
            v = body.get(key, False)
            if not isinstance(v, bool):
                raise RequestError(400, f"\"{key}\" must be true or false, got {_json_type(v)}")
            opts[key] = v
        b = body.get("binarize")
        if b not in (None, "left", "right"):
            raise RequestError(400, f"\"binarize\" must be null, \"left\" or \"right\", got {json.dumps(b)}")
        opts["binarize"] = b
        if opts["svg"] and not self.tree_model:
            raise RequestError(400, f"\"svg\" draws a tree model's per-node predictions; this server's model "
                                    f"({self.model.kind}) predicts the sentence only")
        for i, s in enumerate(sentences, 1):
            n = len(s.split())
            if n > self.max_words:
                raise RequestError(413, f"sentence {i} has {n} words; this server takes at most {self.max_words}")
        return sentences, opts

    def predict(self, body):
        """The response to a decoded JSON body: a list of records (as ``dynnets predict --json``)."""
        from .plots import tree_svg
        from .predictions import InputError, json_record, predict_sentence
        sentences, opts = self.parse(body)
        results = []
        for i, s in enumerate(sentences, 1):
            try:
                with self._lock:
                    rec, tree = predict_sentence(self.model, s, binarize=opts["binarize"], where=f"sentence {i}",
                                                 blas_threads=self.blas_threads)
            except InputError as exc:
                raise RequestError(400, str(exc)) from None
            out = json_record(rec, opts["nodes"])
            if opts["svg"]:
                out["svg"] = tree_svg(tree, rec, text=opts["picture_text"])
            results.append(out)
        return results


def _json_type(v):
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(v), type(v).__name__)


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7f)}
#: what a client did, by the error its socket gave
_GONE = {BrokenPipeError: "closed the connection", ConnectionResetError: "reset the connection",
         ConnectionAbortedError: "aborted the connection"}


class _Handler(BaseHTTPRequestHandler):
    server_version = "dynnets"
    protocol_version = "HTTP/1.0"
    default_request_version = "HTTP/1.0"   # a garbage request line still gets a status line (not HTTP/0.9's bare body)
    timeout = 10                      # seconds a client may take to send its request (make_server's timeout)

    def setup(self):
        self.timeout = self.server.request_timeout
        super().setup()

    def handle(self):
        # One request per connection (HTTP/1.0). Its log line is written once
        # the answer is out, so that a client that went away meanwhile gives
        # one line saying so, not a request line and a traceback.
        self._answer = None              # (status, reason) once an answer is begun
        self._timed_out = False
        try:
            self.handle_one_request()
        except ConnectionError as exc:
            what = _GONE.get(type(exc), f"broke the connection ({type(exc).__name__})")
            if self._answer is None:
                self.log_message("%s", f"the client {what} before its request was read"
                                 + (f" ({getattr(self, 'requestline', '')[:200]!r})"
                                    if getattr(self, "requestline", "") else ""))
            else:
                self.log_message("%s", f"{self._request_line()} [not sent: the client {what}]")
            return
        if self._answer is not None and not self._timed_out:
            self.log_message("%s", self._request_line())

    def _request_line(self):
        status, reason = self._answer
        return f'"{self.requestline[:200]}" {status}' + (f" {reason}" if reason else "")

    def log_request(self, code="-", size="-"):
        # called by send_response: noted here, logged by handle() once the answer is sent
        self._answer = (int(code), getattr(self, "_reason", None))

    def log_error(self, fmt, *args):
        # http.server calls this for a read or a write that timed out
        self._timed_out = True
        if self._answer is not None:
            self.log_message("%s", f"{self._request_line()} [not sent: the client did not read it within "
                                   f"{self.timeout:g} s]")
        else:
            self.log_message("%s", f"no complete request within {self.timeout:g} s; connection closed")

    def log_message(self, fmt, *args):
        if not self.server.quiet:
            host, port = self.client_address[:2]
            out = self.server.log_file or sys.stderr
            # what a client sent is written escaped: no control characters reach the terminal
            out.write(f"{host}:{port} - {(fmt % args).translate(_CONTROL)}\n")
            out.flush()

    def _send(self, status, body, content_type):
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status, reason, allow=None):
        if getattr(self, "_unread", 0) > 0:
            self._discard(self._unread)
        self._reason = reason
        data = json.dumps({"error": reason}).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if allow:
            self.send_header("Allow", allow)
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_error(self, code, message=None, explain=None):
        # malformed request lines and headers, answered by http.server itself: JSON with one line too
        reason = message or HTTPStatus(code).phrase
        self._error(code, reason)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            self._send(200, self.server.page, "text/html; charset=utf-8")
        elif path == "/predict":
            self._error(405, "use POST for /predict, with a JSON body such as {\"text\": \"it is good .\"}", "POST")
        else:
            self._error(404, f"no page at {path[:200]}: the page is at / and predictions at POST /predict")

    do_HEAD = do_GET

    def do_POST(self):
        try:
            self._unread = max(int(self.headers.get("Content-Length", 0)), 0)
        except ValueError:
            self._unread = 0
        path = self.path.split("?", 1)[0]
        if path != "/predict":
            if path in ("/", "/index.html"):
                self._error(405, f"{path} takes GET; predictions are at POST /predict", "GET, HEAD")
            else:
                self._error(404, f"no endpoint at {path[:200]}: predictions are at POST /predict")
            return
        try:
            body = self._read_json()
            result = self.server.service.predict(body)
        except RequestError as exc:
            self._error(exc.status, exc.reason)
            return
        except ConnectionError:          # the client went away: handle() logs it
            raise
        except Exception as exc:         # a fault of ours: answered, logged (with the answer), and the server goes on
            self._error(500, f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
            return
        self._send(200, json.dumps(result, indent=1), "application/json; charset=utf-8")

    def _reject(self, method):
        self._error(405, f"{method} is not supported: GET / for the page, POST /predict for predictions",
                    "GET, HEAD, POST")

    def do_PUT(self):
        self._reject("PUT")

    def do_DELETE(self):
        self._reject("DELETE")

    def do_PATCH(self):
        self._reject("PATCH")

    def do_OPTIONS(self):
        self._reject("OPTIONS")

    def _discard(self, n):
        self._unread = 0
        try:
            _discard_body(self.rfile, n)
        except OSError:          # the client gave up or timed out: it gets the answer if it still listens
            pass

    def _read_json(self):
        ctype = self.headers.get("Content-Type", "")
        media = ctype.split(";", 1)[0].strip().lower()
        if media != "application/json":
            raise RequestError(415, f"expected Content-Type: application/json, got {ctype[:100]!r}"
                               if ctype else "expected Content-Type: application/json, got none")
        if self.headers.get("Transfer-Encoding"):
            raise RequestError(411, "chunked bodies are not accepted: send a Content-Length")
        length = self.headers.get("Content-Length")
        if length is None:
            raise RequestError(411, "a POST body needs a Content-Length header")
        try:
            n = int(length)
            if n < 0:
                raise ValueError
        except ValueError:
            raise RequestError(400, f"Content-Length must be a byte count, got {length[:40]!r}") from None
        limit = self.server.max_bytes
        if n > limit:
            raise RequestError(413, f"the body is {n} bytes; this server reads at most {limit}")
        try:
            raw = self.rfile.read(n)
        except TimeoutError:
            self._unread = 0
            raise RequestError(408, f"the {n}-byte body (Content-Length) did not arrive within "
                                    f"{self.timeout:g} s") from None
        self._unread = 0
        if len(raw) < n:
            raise RequestError(400, f"the body ended after {len(raw)} of {n} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestError(400, f"the body is not UTF-8 (byte {exc.start})") from None
        if not text.strip():
            raise RequestError(400, "the body is empty: expected JSON such as {\"text\": \"it is good .\"}")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise RequestError(400, f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise RequestError(400, "malformed JSON: nested too deeply") from None


_DRAIN_MAX = 1 << 20


def _discard_body(rfile, n):
    """Read and drop up to ``n`` bytes (at most ``_DRAIN_MAX``): closing a socket
    with unread data makes the kernel reset the connection, and the client could
    lose the answer."""
    left = min(n, _DRAIN_MAX)
    while left > 0:
        chunk = rfile.read(min(left, 65536))
        if not chunk:
            break
        left -= len(chunk)


class _Server(ThreadingHTTPServer):
    # answer the requests in flight before closing (each has the handler's socket timeout)
    daemon_threads = False
    block_on_close = True

    def handle_error(self, request, client_address):
        # socketserver's default prints a traceback per failed request; the
        # handler logs broken clients itself, so what arrives here is a fault
        # of ours: one line (the traceback with DYNNETS_DEBUG=1)
        if os.environ.get("DYNNETS_DEBUG"):
            super().handle_error(request, client_address)
            return
        if self.quiet:
            return
        exc = sys.exc_info()[1]
        host, port = client_address[:2]
        out = self.log_file or sys.stderr
        out.write(f"{host}:{port} - internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}\n")
        out.flush()


def make_server(model, host="127.0.0.1", port=8000, max_bytes=MAX_BYTES, max_words=MAX_WORDS,
                max_sentences=MAX_SENTENCES, blas_threads=1, quiet=False, title=None, timeout=10.0, log_file=None):
    """A ready (bound, not yet serving) HTTP server for ``model``; ``port=0`` picks a free port
    (``server.server_address`` tells which). Call ``serve_forever()`` on it.

    ``timeout``: seconds a client may take to send its request or read the
    answer. ``log_file``: where the one line per request goes (default
    ``sys.stderr``; nothing with ``quiet``)."""
    srv = _Server((host, port), _Handler)
    srv.request_timeout = float(timeout)
    srv.log_file = log_file
    srv.service = PredictionService(model, max_words=max_words, max_sentences=max_sentences,
                                    blas_threads=blas_threads)
    srv.max_bytes = int(max_bytes)
    srv.quiet = quiet
    srv.page = page_html(model, title=title)
    return srv


def serve(model, host="127.0.0.1", port=8000, out=None, **kwargs):
    """Serve ``model`` until Ctrl-C (SIGINT) or SIGTERM; prints where, and when it stopped."""
    out = out or sys.stdout
    srv = make_server(model, host, port, **kwargs)
    # a first forward before the address is printed: kernels load, and the first visitor does not wait
    srv.service.predict({"text": "a"})
    h, p = srv.server_address[:2]
    shown = f"[{h}]" if ":" in h else h
    prev = None
    if threading.current_thread() is threading.main_thread():
        prev = signal.signal(signal.SIGTERM, _terminate)
    print(f"dynnets serve: {model.kind} on http://{shown}:{p}/ (POST /predict for JSON); Ctrl-C stops", file=out,
          flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
        if prev is not None:
            signal.signal(signal.SIGTERM, prev)
    print("dynnets serve: stopped", file=out, flush=True)
    return 0


def _terminate(signum, frame):
    raise KeyboardInterrupt


def page_html(model, title=None):
    """The page at ``/`` for ``model`` (self-contained: no external scripts, styles or fonts)."""
    from html import escape
    from .plots import class_names, palette
    kind = getattr(model, "kind", type(model).__name__)
    ck = getattr(model, "checkpoint", None) or {}
    about = f"{kind} model" + (f", epoch {ck['epoch']}" if "epoch" in ck else "")
    C = getattr(model, "num_classes", 5)
    names = json.dumps(list(class_names(C)))
    colours = json.dumps(list(palette(C)))
    return PAGE.replace("{{TITLE}}", escape(title or "dynnets: try a sentence")).replace(
        "{{ABOUT}}", escape(about)).replace("{{NAMES}}", names).replace("{{COLOURS}}", colours)


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{TITLE}}</title>
<style>
body { font-family: 'DejaVu Sans', Verdana, Arial, sans-serif; margin: 1.5em auto; max-width: 72em; padding: 0 1em;
       color: #222; }
h1 { font-size: 1.3em; margin-bottom: 0.2em; }
.about { color: #666; margin-top: 0; }
form { display: flex; gap: 0.5em; flex-wrap: wrap; align-items: center; }
#sentence { flex: 1 1 30em; font-size: 1em; padding: 0.4em; }
button { font-size: 1em; padding: 0.4em 1.2em; }
#error { color: #b00020; min-height: 1.2em; margin: 0.6em 0; }
#prediction table { border-collapse: collapse; margin: 0.4em 0; }
#prediction td { padding: 0.15em 0.6em 0.15em 0; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid #666; vertical-align: -0.1em; }
.bar { display: inline-block; height: 0.8em; background: #888; }
#tree { overflow-x: auto; margin-top: 0.6em; }
#tree svg { max-width: 100%; height: auto; }
.hint { color: #666; font-size: 0.9em; }
</style>
</head>
<body>
<h1>{{TITLE}}</h1>
<p class="about">{{ABOUT}}. Type a sentence, an unlabelled tree <code>((it (is (not good))) .)</code> or an SST
tree <code>(1 (2 it) (1 (2 is) (1 bad)))</code>; hover over a node for its probabilities.</p>
<form id="form">
<input id="sentence" name="sentence" type="text" autocomplete="off" autofocus
       placeholder="the film is not good , but the acting is great .">
<button id="submit" type="submit">Predict</button>
<label><input id="picture-text" type="checkbox"> probabilities in the boxes</label>
</form>
<div id="error" role="alert"></div>
<div id="prediction"></div>
<div id="tree"></div>
<script>
"use strict";
const NAMES = {{NAMES}};
const COLOURS = {{COLOURS}};
const form = document.getElementById("form");
const input = document.getElementById("sentence");
const errorBox = document.getElementById("error");
const prediction = document.getElementById("prediction");
const treeBox = document.getElementById("tree");

function show(rec) {
  const p = rec.root;
  let k = 0;
  for (let i = 1; i < p.length; i++) if (p[i] > p[k]) k = i;
  const rows = p.map((q, i) => {
    const tr = document.createElement("tr");
    const name = document.createElement("td");
    const sw = document.createElement("span");
    sw.className = "swatch";
    sw.style.background = COLOURS[i] || "#888";
    name.append(sw, " " + i + " " + (NAMES[i] || i));
    const val = document.createElement("td");
    val.textContent = q.toFixed(3);
    const barCell = document.createElement("td");
    const bar = document.createElement("span");
    bar.className = "bar";
    bar.style.width = (12 * q).toFixed(2) + "em";
    bar.style.background = COLOURS[i] || "#888";
    barCell.append(bar);
    tr.append(name, val, barCell);
    if (i === k) tr.style.fontWeight = "bold";
    return tr;
  });
  const head = document.createElement("p");
  head.id = "predicted";
  head.dataset.pred = String(k);
  head.textContent = "predicted: " + k + " " + (NAMES[k] || k) + " (" + p[k].toFixed(3) + ")";
  const table = document.createElement("table");
  table.append(...rows);
  prediction.replaceChildren(head, table);
  if (rec.unknown_words && rec.unknown_words.length) {
    const u = document.createElement("p");
    u.className = "hint";
    u.textContent = "not in the vocabulary: " + rec.unknown_words.join(", ");
    prediction.append(u);
  }
  // the SVG comes from the server's writer, which escapes every word
  treeBox.innerHTML = rec.svg || "";
}

// an error replaces the previous sentence's result: the tree and probabilities
// left below it would read as the answer to the input that failed
function showError(message) {
  prediction.replaceChildren();
  treeBox.replaceChildren();
  errorBox.textContent = message;
}

form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  errorBox.textContent = "";
  const text = input.value;
  try {
    const r = await fetch("/predict", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({text: text, svg: true,
                            picture_text: document.getElementById("picture-text").checked})});
    const body = await r.json();
    if (!r.ok) {
      showError(body.error || ("error " + r.status));
      return;
    }
    show(body[0]);
  } catch (e) {
    showError("the server did not answer: " + e);
  }
});
</script>
</body>
</html>
"""
