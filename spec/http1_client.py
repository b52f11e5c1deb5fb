"""A raw HTTP/1.1 client for spec/server_http1_spec.lua: sends the bytes of
one MODE to 127.0.0.1:PORT over a plain socket, reads until the server
closes (or 20 s of silence: a loaded machine under the sanitizers can
keep a flooded server from writing for seconds), and prints the status codes of the responses
in order, the bodies of the modes that check them, then "closed" or "open",
then "done".

    python3 spec/http1_client.py MODE PORT
"""
import re
import select
import socket
import sys
import time

MODE, PORT = sys.argv[1], int(sys.argv[2])


def connect_unary(body, extra=b"", path=b"/srv.Calc/Add", close=False):
    head = (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n" + extra)
    if close:
        head += b"Connection: close\r\n"
    return head + b"\r\n" + body


ADD = b'{"x": 20, "y": 22}'


def frame(msg, flag=0):
    return bytes([flag]) + len(msg).to_bytes(4, "big") + msg


def chunked(parts):
    return b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in parts) + b"0\r\n\r\n"


def send_slowly(s, data, pause):
    for i in range(len(data)):
        try:
            s.sendall(data[i:i + 1])
        except OSError:
            return
        time.sleep(pause)


s = socket.create_connection(("127.0.0.1", PORT))
show_body = show_length = summary = False
if MODE == "unary":
    s.sendall(connect_unary(ADD, close=True))
    show_body = True
elif MODE == "pipeline":  # three in one write, the last closes
    s.sendall(connect_unary(ADD) + connect_unary(b'{"x": 1}') + connect_unary(b'{"y": 2}', close=True))
    show_body = True
elif MODE == "split":  # one request a byte at a time
    send_slowly(s, connect_unary(ADD, close=True), 0.001)
    show_body = True
elif MODE == "chunked":  # a chunked request body
    s.sendall(b"POST /srv.Calc/Add HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
              + chunked([ADD[:5], ADD[5:9], ADD[9:]]))
    show_body = True
elif MODE == "expect":
    s.sendall(connect_unary(ADD, extra=b"Expect: 100-continue\r\n", close=True))
    show_body = True
elif MODE == "stream":  # Connect server streaming, chunked response
    body = frame(b'{"x":2}')
    s.sendall(b"POST /srv.Calc/Count HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    show_body = True
elif MODE == "bidi":  # a bidirectional stream: refused, it needs HTTP/2
    body = frame(b'{"x":2}')
    s.sendall(b"POST /srv.Calc/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    show_body = True
elif MODE == "bidiget":  # a Connect GET, then its HEAD, of a bidirectional method
    target = b"/srv.Calc/Echo?connect=v1&encoding=json&message=%7B%7D"
    s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n"
              + b"HEAD " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    show_body = True
elif MODE == "http10":  # gRPC-Web over HTTP/1.0: the body runs until close
    body = frame(b'{"x":2}')
    s.sendall(b"POST /srv.Calc/Count HTTP/1.0\r\nContent-Type: application/grpc-web+json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    show_body = True
elif MODE in ("http10big", "closebig"):  # a long stream: all of it before the close
    body = frame(b'{"x":20000}')
    version = b"HTTP/1.0" if MODE == "http10big" else b"HTTP/1.1"
    close = b"" if MODE == "http10big" else b"Connection: close\r\n"
    s.sendall(b"POST /srv.Calc/Count " + version + b"\r\nHost: x\r\nContent-Type: application/grpc-web+json\r\n"
              + close + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    summary = True
elif MODE == "grpc":  # plain gRPC needs HTTP/2
    s.sendall(b"POST /srv.Calc/Add HTTP/1.1\r\nHost: x\r\nContent-Type: application/grpc\r\n"
              b"Content-Length: 5\r\n\r\n" + frame(b""))
elif MODE == "clte":
    s.sendall(b"POST /srv.Calc/Add HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
elif MODE == "dupcl":
    s.sendall(b"POST /srv.Calc/Add HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}")
elif MODE == "hugechunk":
    s.sendall(b"POST /srv.Calc/Add HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n")
elif MODE == "bigbody":  # a body over the receive limit (max_receive 1024 in the spec)
    s.sendall(connect_unary(b'{"note": "' + b"n" * 5000 + b'"}', close=True))
elif MODE == "slowloris":  # a head that never ends, a byte every 0.1 s
    send_slowly(s, b"POST /srv.Calc/Add HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 40, 0.1)
elif MODE == "slowbody":  # a whole head, then a body a byte every 0.2 s (8 s)
    body = b'{"x": 20, "y": 22, "note": "' + b"z" * 12 + b'"}'
    s.sendall(b"POST /srv.Calc/Add HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    send_slowly(s, body, 0.2)
elif MODE == "stallbody":  # a whole head, one byte of the body, then nothing
    s.sendall(b"POST /srv.Calc/Add HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 40\r\n\r\n{")
elif MODE == "flood":  # pipelined requests, sent without reading the answers
    try:
        s.sendall(connect_unary(ADD) * 60000 + connect_unary(ADD, close=True))
    except OSError:
        pass
elif MODE == "manyfields":
    s.sendall(b"POST /srv.Calc/Add HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 500 + b"\r\n")
elif MODE in ("headmanyfields", "getmanyfields"):  # a 431 (a HEAD's: the head alone)
    method = b"HEAD" if MODE == "headmanyfields" else b"GET"
    s.sendall(method + b" /srv.Calc/Add HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 500 + b"\r\n")
    show_body = show_length = True
elif MODE == "headlonguri":  # a HEAD's 414 (after an empty line): the head alone
    s.sendall(b"\r\nHEAD /srv.Calc/Add?" + b"q" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    show_body = show_length = True
elif MODE == "getlonguri":  # a GET's 414, with its body
    s.sendall(b"GET /srv.Calc/Add?" + b"q" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    show_body = show_length = True
elif MODE == "endless":  # answered early (415), its chunked body going on for ever
    s.sendall(b"POST /srv.Calc/Add HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"4000\r\n" + b"z" * 0x4000 + b"\r\n"
    s.setblocking(False)
    data, closed, pending, sent = b"", False, b"", 0
    until = time.time() + 20
    # sends until the server closes (64 MiB or 20 s of it: "open")
    while not closed and sent < 64 << 20 and time.time() < until:
        readable, writable, _ = select.select([s], [s], [], 1)
        if readable:
            try:
                got = s.recv(65536)
                data += got
                closed = not got
            except BlockingIOError:
                pass
            except OSError:
                closed = True
        if writable and not closed:
            pending = pending or chunk
            try:
                n = s.send(pending)
                pending, sent = pending[n:], sent + n
            except BlockingIOError:
                pass
            except OSError:
                pass  # reset: the next read tells
    head = data.partition(b"\r\n\r\n")[0]
    print("status " + " ".join(c.decode() for c in re.findall(rb"HTTP/1\.[01] (\d{3}) ", data)))
    print("connection " + (re.search(rb"(?i)\r\nconnection: *([^\r]*)", head) or [b"", b"none"])[1].decode())
    print("closed" if closed else "open")
    print("done")
    sys.exit(0)
else:
    raise SystemExit("unknown mode " + MODE)

s.settimeout(20)
data = b""
closed = False
while True:
    try:
        got = s.recv(65536)
    except socket.timeout:
        break
    except OSError:
        closed = True
        break
    if not got:
        closed = True
        break
    data += got
codes = re.findall(rb"HTTP/1\.[01] (\d{3}) ", data)
if MODE == "flood":  # how many answers does not matter, only that it ends
    codes = sorted(set(codes))
print("status " + " ".join(c.decode() for c in codes))
if summary:  # the gRPC-Web frames of the one response: messages, the last one, the trailers
    body = data.partition(b"\r\n\r\n")[2]
    if b"transfer-encoding: chunked" in data.partition(b"\r\n\r\n")[0].lower():
        plain, rest = b"", body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            plain, rest = plain + rest[:n], rest[n + 2:]
            if n == 0:
                break
        body = plain
    count, last, trailers = 0, b"", b"none"
    while len(body) >= 5:
        n = int.from_bytes(body[1:5], "big")
        if body[0] & 0x80:
            trailers = body[5:5 + n].strip()
        else:
            count, last = count + 1, body[5:5 + n]
        body = body[5 + n:]
    print("messages %d last %s trailers %s" % (count, last.decode(), trailers.decode()))
if show_body:
    for part in re.split(rb"HTTP/1\.[01] \d{3} [^\r]*\r\n", data)[1:]:
        head, _, body = part.partition(b"\r\n\r\n")
        if show_length:
            print("length " + re.search(rb"(?i)content-length: (\d+)", head).group(1).decode())
        print("body " + repr(body)[2:-1])
print("closed" if closed else "open")
print("done")
