"""A raw HTTP/1.1 server for spec/client_http1_spec.lua: answers every
Connect unary request on 127.0.0.1 (a free port) with the canned bytes of
one MODE, each connection in a thread, and prints "PORT PID" once
listening. A request to /fake.Conns/Count is answered with the count of
connections accepted so far as the message (Sum.total), one to
/fake.Heads/Count with the count of request heads read so far (those of
/fake.* aside), each counted once read, before its body.

    python3 spec/http1_fake_server.py MODE

The message answered is srv.Sum {total = 42} (bytes 08 2a). Modes:
  close10      HTTP/1.0, no Content-Length: the body ends with the close
  close        HTTP/1.1 with Connection: close after each response
  split        a valid response, one byte at a time
  interim      100 Continue, then the response
  chunked      the message in two chunks, then trailers
  badchunk     a chunk size of 17 hex digits
  bare_lf      lines ending in a bare LF
  te_cl        Transfer-Encoding and Content-Length both
  cut          Content-Length 10, 2 bytes, then the close
  fields       201 fields in the head
  idle408      after each response, 0.1 s later, an unasked 408 and the close
               (a server ending an idle kept-alive connection)
  framing      the message is total = 1 for a request framed by Content-Length,
               2 for one sent chunked (Transfer-Encoding: chunked)
  grpcweb      a gRPC-Web answer (for a gRPC-Web client) with HTTP's own fields
               (Date, Server, Vary, Content-Length) beside X-Head, and the
               trailers message with grpc-status 0, x-trail and date
"""
import os
import socket
import sys
import threading
import time

MODE = sys.argv[1]
MSG = b"\x08\x2a"
count = 0
heads = 0
lock = threading.Lock()


def unary(body, extra=b"", version=b"1.1"):
    return (b"HTTP/" + version + b" 200 OK\r\nContent-Type: application/proto\r\n" + extra
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def answer(path, chunked):
    if path == b"/fake.Conns/Count":
        with lock:
            n = count
        return unary(b"\x08" + bytes([n]))
    if path == b"/fake.Heads/Count":
        with lock:
            n = heads
        return unary(b"\x08" + bytes([n]))
    if MODE == "framing":
        return unary(b"\x08" + bytes([2 if chunked else 1]))
    if MODE == "close10":
        return b"HTTP/1.0 200 OK\r\nContent-Type: application/proto\r\n\r\n" + MSG
    if MODE == "close":
        return unary(MSG, b"Connection: close\r\n")
    if MODE == "interim":
        return b"HTTP/1.1 100 Continue\r\n\r\n" + unary(MSG)
    if MODE == "chunked":
        return (b"HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"1\r\n\x08\r\n1;ext=1\r\n\x2a\r\n0\r\nTrailer-X-T: t1\r\n\r\n")
    if MODE == "badchunk":
        return (b"HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"fffffffffffffffff\r\n")
    if MODE == "bare_lf":
        return b"HTTP/1.1 200 OK\nContent-Type: application/proto\nContent-Length: 2\n\n" + MSG
    if MODE == "te_cl":
        return (b"HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\nTransfer-Encoding: chunked\r\n"
                b"Content-Length: 2\r\n\r\n2\r\n" + MSG + b"\r\n0\r\n\r\n")
    if MODE == "cut":
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\nContent-Length: 10\r\n\r\n" + MSG
    if MODE == "grpcweb":
        trailers = b"grpc-status:0\r\nx-trail:t1\r\ndate:d\r\n"
        body = (b"\x00\x00\x00\x00\x02" + MSG + b"\x80" + len(trailers).to_bytes(4, "big") + trailers)
        return (b"HTTP/1.1 200 OK\r\nContent-Type: application/grpc-web+proto\r\n"
                b"Date: Sun, 06 Dec 2026 10:00:00 GMT\r\nServer: fake\r\nVary: Origin\r\nX-Head: h1\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    if MODE == "fields":
        return unary(MSG, b"".join(b"X-F%d: v\r\n" % i for i in range(201)))
    return unary(MSG)


def read_until(conn, buf, mark):
    while mark not in buf:
        d = conn.recv(65536)
        if not d:
            return None
        buf += d
    return buf


def read_request(conn, buf):
    """The next request's path, whether it came chunked, and the bytes after it."""
    global heads
    buf = read_until(conn, buf, b"\r\n\r\n")
    if buf is None:
        return None, False, b""
    head, _, rest = buf.partition(b"\r\n\r\n")
    if not head.split(b" ")[1].startswith(b"/fake."):
        with lock:
            heads += 1
    length, chunked = 0, False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
        if k.strip().lower() == b"transfer-encoding" and v.strip().lower() == b"chunked":
            chunked = True
    while chunked:  # chunks (no extensions, no trailers from our client)
        rest = read_until(conn, rest, b"\r\n")
        if rest is None:
            return None, False, b""
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        while len(rest) < size + 2:
            d = conn.recv(65536)
            if not d:
                return None, False, b""
            rest += d
        rest = rest[size + 2:]
        if size == 0:
            break
    while len(rest) < length:
        d = conn.recv(65536)
        if not d:
            return None, False, rest
        rest += d
    return head.split(b" ")[1], chunked, rest[length:]


def serve(conn):
    global count
    with lock:
        count += 1
    buf = b""
    try:
        while True:
            path, chunked, buf = read_request(conn, buf)
            if path is None:
                return
            out = answer(path, chunked)
            if MODE == "split" and path != b"/fake.Conns/Count":
                for i in range(len(out)):
                    conn.sendall(out[i:i + 1])
                    time.sleep(0.002)
            else:
                conn.sendall(out)
            if path != b"/fake.Conns/Count" and MODE in ("close10", "close", "cut", "badchunk", "bare_lf", "te_cl"):
                return
            if path != b"/fake.Conns/Count" and MODE == "idle408":
                time.sleep(0.1)
                conn.sendall(b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
                return
    finally:
        conn.close()


def main():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    print(s.getsockname()[1], os.getpid(), flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


main()
