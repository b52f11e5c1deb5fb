"""Writes http1_client_seeds/ for http1_client_fuzz.c: whole HTTP/1.1
replies of each protocol, each prefixed by the byte that picks the
protocol (top two bits: gRPC-Web, gRPC-Web-Text, Connect unary, Connect
streaming; bit 0: the connection is lost at the end) and cut into the
pieces the target reads (a length byte, then that many bytes plus one).

    python3 core/net/fuzz/http1_client_seeds.py
"""
import base64
import os

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "http1_client_seeds")


def chunks(data, n):
    out = b""
    for i in range(0, len(data), n):
        c = data[i:i + n]
        out += b"%x\r\n" % len(c) + c + b"\r\n"
    return out


def pieces(b):
    out, i, k = b"", 0, 0
    while i < len(b):
        n = [63, 5, 20, 0, 40][k % 5] + 1
        k += 1
        out += bytes([n - 1]) + b[i:i + n]
        i += n
    return out


def frame(m, flag=0):
    return bytes([flag]) + len(m).to_bytes(4, "big") + m


MSG = b"\x0a\x02hi"
TRAILERS = frame(b"grpc-status:0\r\ngrpc-message:ok\r\nx-t: 1\r\n", 0x80)
WEB = frame(MSG) + TRAILERS
TEXT = base64.b64encode(frame(MSG)) + base64.b64encode(TRAILERS)
UNARY = b"HTTP/1.1 200 OK\r\ncontent-type: application/proto\r\ntrailer-x-t: 1\r\ncontent-length: %d\r\n\r\n" % len(MSG) + MSG
ERROR = b'{"code":"not_found","message":"gone","details":[]}'
STREAM = frame(MSG) + frame(MSG) + frame(b'{"metadata":{"x-t":["1"]}}', 2)

SEEDS = {
    "gw_length": (0x00, b"HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web+proto\r\ncontent-length: %d\r\n\r\n"
                  % len(WEB) + WEB),
    "gw_chunked": (0x01, b"HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web+proto\r\n"
                   b"transfer-encoding: chunked\r\n\r\n" + chunks(WEB, 7) + b"0\r\n\r\n"),
    "gw_trailers_only": (0x00, b"HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web+proto\r\ngrpc-status: 5\r\n"
                         b"grpc-message: no\r\ncontent-length: 0\r\n\r\n" * 2),
    "gw_close": (0x01, b"HTTP/1.0 200 OK\r\ncontent-type: application/grpc-web+proto\r\n\r\n" + WEB),
    "gwt_chunked": (0x40, b"HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web-text+proto\r\n"
                    b"transfer-encoding: chunked\r\n\r\n" + chunks(TEXT, 5) + b"0\r\n\r\n"),
    "connect_unary_keepalive": (0x80, b"HTTP/1.1 100 Continue\r\n\r\n" + UNARY * 3),
    "connect_error": (0x81, b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                      % len(ERROR) + ERROR),
    "connect_stream": (0xc0, b"HTTP/1.1 200 OK\r\ncontent-type: application/connect+proto\r\n"
                       b"transfer-encoding: chunked\r\n\r\n" + chunks(STREAM, 9) + b"0\r\nx-late: 1\r\n\r\n"),
}

os.makedirs(HERE, exist_ok=True)
for name, (selector, reply) in SEEDS.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(bytes([selector]) + pieces(reply))
