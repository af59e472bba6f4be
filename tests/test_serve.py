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
    p = subprocess.Popen([sys.executable, "-m", "dynnets", "serve", "--checkpoint", str(checkpoint), "--port", "0",
                          "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
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
