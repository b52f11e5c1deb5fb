"""An HTTP/2 (h2c, prior knowledge) client that goes away, for
spec/stall_spec.lua, in raw frames (no h2 module needed):

    python3 spec/h2_abort_client.py PORT PATH JSON reset|close

POSTs JSON (application/json) to 127.0.0.1:PORT PATH on stream 1, waits
0.5 s, then resets the stream (RST_STREAM CANCEL) and keeps the connection
0.5 s more, or closes the connection. Prints the frame types it got.
"""
import socket
import struct
import sys
import time


def frame(kind, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", sid) + payload


def literal(name, value):  # literal header field without indexing, new name, no Huffman
    name, value = name.encode(), value.encode()
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def main():
    port, path, body, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode(), sys.argv[4]
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    block = b"\x83\x86" + b"\x04" + bytes([len(path)]) + path.encode() + b"\x01\x09127.0.0.1" \
        + literal("content-type", "application/json")
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0) + frame(1, 4, 1, block) + frame(0, 1, 1, body))
    got = []
    end = time.time() + 0.5
    reset = False
    while True:
        left = end - time.time()
        if left <= 0:
            if mode == "reset" and not reset:
                s.sendall(frame(3, 0, 1, struct.pack(">I", 8)))  # CANCEL
                reset, end = True, time.time() + 0.5
                continue
            break
        s.settimeout(left)
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        if not data:
            break
        while len(data) >= 9:
            n = int.from_bytes(data[:3], "big")
            got.append(str(data[3]))
            if data[3] == 0 and n:
                got.append(repr(data[9:9 + n]))
            data = data[9 + n:]
    s.close()
    print(" ".join(got))


main()
