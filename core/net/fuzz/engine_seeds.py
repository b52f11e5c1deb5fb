"""Writes engine_seeds/ for engine_fuzz.c: server replies (python3-h2) to
three requests, cut into the harness's chunks (a byte: length - 1, then up
to 64 bytes). Run from this folder with /usr/bin/python3."""
import zlib

import h2.config
import h2.connection


def framed(b, flag=0):
    return bytes([flag]) + len(b).to_bytes(4, "big") + b


def server_bytes(script):
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    s = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    c.initiate_connection()
    for sid in (1, 3, 5):
        c.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", "/f.F/A"),
                             (":authority", "fuzz:1"), ("content-type", "application/grpc")])
    s.initiate_connection()
    s.receive_data(c.data_to_send())
    s.data_to_send()  # its SETTINGS: the harness sends an empty one itself
    script(s)
    return s.data_to_send()


def chunked(b):
    out = b""
    while b:
        piece, b = b[:64], b[64:]
        out += bytes([len(piece) - 1]) + piece
    return out


OK = [(":status", "200"), ("content-type", "application/grpc")]


def unary(s):
    s.send_headers(1, OK + [("x-a", "b"), ("x-d-bin", "AAH/")])
    s.send_data(1, framed(b"response"))
    s.send_headers(1, [("grpc-status", "0"), ("grpc-message", "fine%20now")], end_stream=True)


def gzip_reply(s):
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    body = z.compress(b"a" * 300) + z.flush()
    s.send_headers(3, OK + [("grpc-encoding", "gzip")])
    s.send_data(3, framed(body, 1) + framed(b"plain"))
    s.send_headers(3, [("grpc-status", "0")], end_stream=True)


def faults(s):
    s.send_headers(1, OK + [("grpc-status", "5"), ("grpc-retry-pushback-ms", "20")],
                   end_stream=True)
    s.send_headers(3, [(":status", "503"), ("content-type", "text/plain")])
    s.send_data(3, b"busy", end_stream=True)
    s.reset_stream(5, error_code=7)
    s.close_connection(error_code=0, last_stream_id=3)


for name, script in (("unary", unary), ("gzip", gzip_reply), ("faults", faults)):
    with open("engine_seeds/" + name, "wb") as f:
        f.write(chunked(server_bytes(script)))
