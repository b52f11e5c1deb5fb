"""A DNS server for the specs (spec/dns_spec.lua), over a raw UDP socket
(dnslib is not in Debian): answers A, AAAA and SRV questions from a zone
file it reads again for each question, so a spec changes the records by
rewriting it. The zone is JSON:
  {"svc.test": {"ttl": 300, "A": ["127.0.0.2"], "AAAA": ["::1"],
                "SRV": [[priority, weight, port, "target.test"]],
                "delay": 1.0}}
A name that is not in the zone is NXDOMAIN; "delay" holds its answers
back that many seconds. Usage: dns_server.py ZONE_FILE; prints
"PORT PID", serves on 127.0.0.1 until its standard input closes."""
import json
import os
import socket
import struct
import sys
import threading

TYPES = {1: "A", 28: "AAAA", 33: "SRV"}


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def rdata(kind, value):
    if kind == "A":
        return socket.inet_pton(socket.AF_INET, value)
    if kind == "AAAA":
        return socket.inet_pton(socket.AF_INET6, value)
    priority, weight, port, target = value
    return struct.pack("!HHH", priority, weight, port) + encode_name(target)


def answer(query, zone_file):
    ident, _flags, qdcount = struct.unpack("!HHH", query[:6])
    if qdcount != 1:
        return None, 0
    labels, i = [], 12
    while query[i] != 0:
        n = query[i]
        labels.append(query[i + 1:i + 1 + n].decode())
        i += 1 + n
    qtype = struct.unpack("!H", query[i + 1:i + 3])[0]
    question = query[12:i + 5]
    with open(zone_file) as f:
        zone = json.load(f)
    entry = zone.get(".".join(labels).lower())
    records = []
    if entry is not None and qtype in TYPES:
        for value in entry.get(TYPES[qtype], []):
            data = rdata(TYPES[qtype], value)
            records.append(b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, entry.get("ttl", 300), len(data))
                           + data)
    rcode = 3 if entry is None else 0
    head = struct.pack("!HHHHHH", ident, 0x8180 | rcode, 1, len(records), 0, 0)
    return head + question + b"".join(records), (entry or {}).get("delay", 0)


def main():
    zone_file = sys.argv[1]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], os.getpid(), flush=True)

    def watch_stdin():
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    while True:
        query, peer = sock.recvfrom(512)
        try:
            reply, delay = answer(query, zone_file)
        except (ValueError, IndexError, OSError, struct.error):
            continue
        if reply is None:
            continue
        if delay:
            threading.Timer(delay, sock.sendto, (reply, peer)).start()
        else:
            sock.sendto(reply, peer)


main()
