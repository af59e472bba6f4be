"""``dynnets serve``: POST /predict gives predict --json's output; every bad request a status and a one-line
reason, after which the server still serves; concurrent requests; Ctrl-C in a subprocess."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dynnets.cli import main
from dynnets.data import Vocabulary, load_samples
from dynnets.models import build_model
from dynnets.serve import MAX_BYTES, make_server
from dynnets.train import load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
GOOD = "the film is not good , but the acting is great ."


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    data = load_samples()
    vocab = Vocabulary.from_trees(data["train"])
    path = tmp_path_factory.mktemp("serve") / "best.npz"
    save_checkpoint(path, build_model("treelstm", len(vocab), embed_dim=8, hidden=8, seed=0), vocab)
    return path


@pytest.fixture(scope="module")
def server(checkpoint):
    model = load_checkpoint(checkpoint)
    srv = make_server(model, port=0, quiet=True, max_words=50)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    t.join(10)


def request(srv, method, path, body=None, headers=None, raw=None):
    """(status, headers, parsed JSON or text) of one request."""
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=30)
    h = {"Content-Type": "application/json"} if body is not None or raw is not None else {}
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers=h)
    r = conn.getresponse()
    text = r.read().decode("utf-8")
    conn.close()
    if r.getheader("Content-Type", "").startswith("application/json"):
        return r.status, r, json.loads(text)
    return r.status, r, text


def predict_cli(checkpoint, capsys, *args):
    assert main(["predict", "--checkpoint", str(checkpoint), "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("body, flags", [
    ({"text": GOOD}, [GOOD]),
    ({"text": GOOD, "nodes": True}, ["--nodes", GOOD]),
    ({"sentences": ["(3 (2 it) (3 good))", "((it (is (not good))) .)"], "nodes": True},
     ["--nodes", "(3 (2 it) (3 good))", "((it (is (not good))) .)"]),
    ({"text": "(2 (2 a) (2 b) (2 c))", "binarize": "left"}, ["--binarize", "left", "(2 (2 a) (2 b) (2 c))"]),
])
def test_predict_endpoint_gives_what_predict_json_prints(server, checkpoint, capsys, body, flags):
    status, _, got = request(server, "POST", "/predict", body)
    assert status == 200
    assert got == predict_cli(checkpoint, capsys, *flags)


def test_predict_endpoint_draws_the_tree(server):
    status, _, got = request(server, "POST", "/predict", {"text": GOOD, "svg": True, "nodes": True})
    assert status == 200
    rec = got[0]
    root = ET.fromstring(rec["svg"])
    nodes = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") in ("node", "node leaf")]
    assert len(nodes) == len(rec["nodes"]) == 2 * len(rec["words"]) - 1
    assert [int(g.get("data-pred")) for g in nodes] == [n["pred"] for n in rec["nodes"]]


def test_page_is_served(server):
    status, r, page = request(server, "GET", "/")
    assert status == 200 and r.getheader("Content-Type") == "text/html; charset=utf-8"
    assert 'id="sentence"' in page and 'id="submit"' in page and "/predict" in page
    assert "<script src" not in page and "http" not in page.split("<script>")[1]    # self-contained


BAD = [
    # (name, method, path, body, headers, raw, status, words in the reason)
    ("empty text", "POST", "/predict", {"text": ""}, None, None, 400, ["sentence 1", "empty input"]),
    ("blank text", "POST", "/predict", {"text": "   "}, None, None, 400, ["empty input"]),
    ("100,000-character body", "POST", "/predict", None, None,
     json.dumps({"text": "a " * 50000}).encode(), 413, ["bytes", str(MAX_BYTES)]),
    ("malformed JSON", "POST", "/predict", None, None, b'{"text": "it is', 400, ["malformed JSON", "column"]),
    ("empty body", "POST", "/predict", None, None, b"", 400, ["empty"]),
    ("bad tree label", "POST", "/predict", {"text": "(3 (2 it) (9 good))"}, None, None, 400,
     ["column 12", "0..4", "'9'"]),
    ("unbalanced tree", "POST", "/predict", {"text": "((it is"}, None, None, 400, ["unbalanced"]),
    ("non-binary tree", "POST", "/predict", {"text": "(2 (2 a) (2 b) (2 c))"}, None, None, 400, ["binarize"]),
    ("wrong content type", "POST", "/predict", None, {"Content-Type": "text/plain"}, b'{"text": "good"}', 415,
     ["application/json", "text/plain"]),
    ("form content type", "POST", "/predict", None, {"Content-Type": "application/x-www-form-urlencoded"},
     b"text=good", 415, ["application/json"]),
    ("no content length", "POST", "/predict", None, {"Content-Length": None}, None, 411, ["Content-Length"]),
    ("not UTF-8", "POST", "/predict", None, None, b'{"text": "\xff\xfe"}', 400, ["UTF-8"]),
    ("not an object", "POST", "/predict", ["it is good"], None, None, 400, ["JSON object", "list"]),
    ("unknown field", "POST", "/predict", {"text": "good", "colour": 1}, None, None, 400, ["'colour'"]),
    ("text and sentences", "POST", "/predict", {"text": "good", "sentences": ["bad"]}, None, None, 400, ["both"]),
    ("text not a string", "POST", "/predict", {"text": 3}, None, None, 400, ["string", "number"]),
    ("sentences not strings", "POST", "/predict", {"sentences": ["ok", None]}, None, None, 400, ["sentence 2"]),
    ("nodes not a boolean", "POST", "/predict", {"text": "good", "nodes": "yes"}, None, None, 400, ["nodes"]),
    ("bad binarize", "POST", "/predict", {"text": "good", "binarize": "up"}, None, None, 400, ["binarize"]),
    ("too many words", "POST", "/predict", {"text": "good " * 51}, None, None, 413, ["51 words", "50"]),
    ("unknown path", "GET", "/nope", None, None, None, 404, ["/nope"]),
    ("unknown POST path", "POST", "/predictions", {"text": "good"}, None, None, 404, ["/predict"]),
    ("GET /predict", "GET", "/predict", None, None, None, 405, ["POST"]),
    ("PUT", "PUT", "/predict", {"text": "good"}, None, None, 405, ["PUT"]),
    ("deep JSON", "POST", "/predict", None, None, b"[" * 60000, 400, ["JSON"]),
]


@pytest.mark.parametrize("name, method, path, body, headers, raw, status, words", BAD, ids=[b[0] for b in BAD])
def test_bad_request_gets_a_status_and_one_line_and_the_server_goes_on(server, name, method, path, body, headers,
                                                                       raw, status, words):
    if headers and headers.get("Content-Length", "") is None:
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=30)
        conn.putrequest("POST", path)
        conn.putheader("Content-Type", "application/json")
        conn.endheaders()
        r = conn.getresponse()
        got_status, reply = r.status, json.loads(r.read())
        conn.close()
    else:
        got_status, r, reply = request(server, method, path, body, headers, raw)
    assert got_status == status, (name, reply)
    reason = reply["error"]
    assert "\n" not in reason and reason.strip() == reason and reason
    for w in words:
        assert w in reason, (name, w, reason)
    ok, _, again = request(server, "POST", "/predict", {"text": "it is good ."})
    assert ok == 200 and again[0]["words"] == ["it", "is", "good", "."]


def test_a_garbage_request_line_is_answered(server):
    with socket.create_connection(server.server_address[:2], timeout=30) as s:
        s.sendall(b"HELLO\r\n\r\n")
        chunks = []
        while True:
            c = s.recv(65536)
            if not c:
                break
            chunks.append(c)
        reply = b"".join(chunks).decode()
    assert reply.startswith("HTTP/1.0 400") and '"error"' in reply
    assert request(server, "POST", "/predict", {"text": "good"})[0] == 200


def test_concurrent_requests_get_their_own_answers(server, checkpoint):
    model = load_checkpoint(checkpoint)
    sentences = [GOOD, "it is not bad .", "(3 (2 it) (3 good))", "boring but good",
                 " ".join(["the film is good and"] * 8) + " boring", "not very good"]
    expected = {}
    for s in sentences:
        status, _, got = request(server, "POST", "/predict", {"text": s, "nodes": True})
        assert status == 200
        expected[s] = got
    errors = []

    def client(k):
        for j in range(6):
            s = sentences[(k + j) % len(sentences)]
            status, _, got = request(server, "POST", "/predict", {"text": s, "nodes": True})
            if status != 200 or got != expected[s]:
                errors.append((k, j, s, status))
    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert server.service.model.mode == model.mode          # the per-node forward put it back


def test_ctrl_c_stops_the_server_cleanly(checkpoint):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # as a terminal starts it: SIGINT at its default. A test run started in the background of a
    # non-interactive shell (`cmd &`) inherits SIGINT ignored, and Python then keeps it ignored
    p = subprocess.Popen([sys.executable, "-m", "dynnets", "serve", "--checkpoint", str(checkpoint), "--port", "0",
                          "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = p.stdout.readline()
        assert line.startswith("dynnets serve: treelstm on http://127.0.0.1:"), line
        port = int(line.split("127.0.0.1:")[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/predict", body=json.dumps({"text": "good"}),
                     headers={"Content-Type": "application/json"})
        assert conn.getresponse().status == 200
        conn.close()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert out.strip().endswith("dynnets serve: stopped")
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_serve_arguments(capsys):
    assert main(["serve", "--help"]) == 0
    out = capsys.readouterr().out
    for opt in ("--checkpoint", "--host", "--port", "--max-words", "127.0.0.1"):
        assert opt in out
    assert main(["serve", "--checkpoint", "/no/such.npz"]) == 2
    assert "/no/such.npz" in capsys.readouterr().err
    assert main(["serve", "--checkpoint", __file__, "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


def test_a_port_in_use_is_one_line(checkpoint, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert main(["serve", "--checkpoint", str(checkpoint), "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in err


# --------------------------------------------------------------------------
# broken clients: one log line each, never a traceback
# --------------------------------------------------------------------------


class LogLines:
    """A log file for the server: lines as they are written, and a wait for the next one."""

    def __init__(self):
        self.text = ""
        self.cond = threading.Condition()

    def write(self, s):
        with self.cond:
            self.text += s
            self.cond.notify_all()

    def flush(self):
        pass

    def wait_lines(self, n):
        """The log's lines once it has ``n`` (the server logs after the connection is done)."""
        with self.cond:
            assert self.cond.wait_for(lambda: self.text.count("\n") >= n, timeout=60), self.text
            return self.text.splitlines()


@pytest.fixture
def logged_server(checkpoint):
    log = LogLines()
    srv = make_server(load_checkpoint(checkpoint), port=0, max_words=50, timeout=1.0, log_file=log)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield srv, log
    srv.shutdown()
    srv.server_close()
    t.join(10)


def _send_and_close(srv, data, read=False):
    """Send ``data`` on a new connection and close it (after reading the answer when ``read``);
    returns (the client's own address, the answer)."""
    s = socket.create_connection(srv.server_address[:2], timeout=30)
    me = "%s:%d" % s.getsockname()[:2]
    s.sendall(data)
    answer = b""
    if read:
        while chunk := s.recv(65536):
            answer += chunk
    s.close()
    return me, answer


def _post(body, length=None, ctype=b"application/json"):
    n = len(body) if length is None else length
    return (b"POST /predict HTTP/1.0\r\nContent-Type: " + ctype + b"\r\nContent-Length: " + str(n).encode()
            + b"\r\n\r\n" + body)


GOOD_BODY = json.dumps({"text": "it is good ."}).encode()

BROKEN = [
    # (name, request bytes, read the answer?, words of its one log line)
    ("body cut short", _post(b'{"te', 100), False, ['"POST /predict HTTP/1.0" 400', "ended after 4 of 100 bytes"]),
    ("closed before reading the answer", _post(GOOD_BODY), False, ['"POST /predict HTTP/1.0" 200']),
    ("Content-Length not a number", _post(GOOD_BODY, "abc"), True,
     ["400 Content-Length must be a byte count, got 'abc'"]),
    ("negative Content-Length", _post(GOOD_BODY, -5), True, ["400 Content-Length must be a byte count, got '-5'"]),
    ("huge Content-Length", _post(GOOD_BODY, 10 ** 30), True, ["413 the body is 1" + "0" * 30 + " bytes"]),
    ("body not UTF-8", _post(b'{"text": "\xff\xfe"}'), True, ["400 the body is not UTF-8 (byte 10)"]),
    ("headers cut short", b"POST /predict HTTP/1.0\r\nContent-Type: application/json\r\nContent-Le", False,
     ['"POST /predict HTTP/1.0" 411']),
    ("control characters", b"HELLO\x1b[31m\r\n\r\n", True, ['"HELLO\\x1b[31m" 400']),
]


@pytest.mark.parametrize("name, data, read, words", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_client_leaves_one_log_line(logged_server, name, data, read, words):
    srv, log = logged_server
    me, answer = _send_and_close(srv, data, read=read)
    (line, ) = log.wait_lines(1)
    assert line.startswith(f"{me} - "), line
    for w in words:
        assert w in line, (w, line)
    assert "Traceback" not in log.text and "\x1b" not in log.text
    if read:
        assert answer.startswith(b"HTTP/1.0 4")
    status, _, got = request(srv, "POST", "/predict", {"text": "it is good ."})    # and it goes on serving
    assert status == 200 and got[0]["words"] == ["it", "is", "good", "."]
    lines = log.wait_lines(2)
    assert len(lines) == 2 and lines[1].endswith('"POST /predict HTTP/1.1" 200'), lines


def test_a_body_that_does_not_arrive_is_answered_408(logged_server):
    srv, log = logged_server
    with socket.create_connection(srv.server_address[:2], timeout=30) as s:
        s.sendall(_post(b'{"te', 100))          # and wait: the server's timeout (1 s here) ends it
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.0 408")
    reason = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    assert reason == "the 100-byte body (Content-Length) did not arrive within 1 s"
    (line, ) = log.wait_lines(1)
    assert line.endswith('"POST /predict HTTP/1.0" 408 ' + reason)


def test_a_client_that_sends_nothing_is_one_line(logged_server):
    srv, log = logged_server
    with socket.create_connection(srv.server_address[:2], timeout=30) as s:
        me = "%s:%d" % s.getsockname()[:2]
        assert s.recv(100) == b""               # the server gives up after its timeout and closes
    (line, ) = log.wait_lines(1)
    assert line == f"{me} - no complete request within 1 s; connection closed"


def test_the_page_clears_the_previous_result_on_an_error():
    """The page's script: every error path goes through showError, which empties the
    prediction and the tree before it shows the reason (the browser test watches it happen)."""
    from dynnets.serve import PAGE
    script = PAGE.split("<script>")[1]
    body = script.split("function showError(message) {")[1].split("\n}\n")[0]
    assert "prediction.replaceChildren();" in body and "treeBox.replaceChildren();" in body
    assert "errorBox.textContent = message;" in body
    assert script.count("errorBox.textContent =") == 2           # the reset on submit, and showError
    assert script.count("showError(") == 3


def test_a_fault_of_ours_outside_predict_is_one_log_line(logged_server, monkeypatch):
    """What escapes a handler (here the page cannot be written) is logged as one
    line, not socketserver's traceback, and the server goes on."""
    srv, log = logged_server
    monkeypatch.setattr(srv, "page", None)
    me, answer = _send_and_close(srv, b"GET / HTTP/1.0\r\n\r\n", read=True)
    assert answer == b""
    (line, ) = log.wait_lines(1)
    assert line.startswith(f"{me} - internal error: TypeError: ") and "Traceback" not in log.text
    status, _, got = request(srv, "POST", "/predict", {"text": "it is good ."})
    assert status == 200 and len(log.wait_lines(2)) == 2
