"""A raw HTTP/2 client written with python3-h2, for spec/server_attack_spec.lua:
sends one kind of bad or hostile input to a gRPC server and prints what came
back, on one line.

  /usr/bin/python3 spec/h2_client.py MODE PORT

Modes and what they print:
  garbage       bytes that are not HTTP/2            -> "closed" or "goaway N"
  preface       the preface and SETTINGS, nothing else -> "settings" (then "closed"
                 once the server gives up on it is not waited for)
  nopath        HEADERS without :path                  -> "rst N" (RST_STREAM code)
  unknown       a call of /srv.Calc/Nope               -> "status 12"
  ctype         content-type text/plain               -> "http 415"
  big           a message prefix of 5 MiB              -> "status 8"
  truncated     END_STREAM inside a message            -> "status 13"
  encoding      grpc-encoding snappy, compressed flag  -> "status 12"
  undecodable   a message that is not a srv.Point      -> "status 13"
  rstflood      HEADERS then RST_STREAM, 2000 times    -> "goaway 11"
  pingflood     2000 PING frames                       -> "goaway 11"
  settingsflood 2000 SETTINGS frames                   -> "goaway 11"
  noread        a server stream never read, held 2 s   -> "held N" (bytes received)
  silent        a TCP connection that sends nothing    -> "closed" once the server closes it
  twoconns      a second connection past max_connections -> "second closed"
  lingerfill:N  N connections of garbage held open after the server's GOAWAY
                 (they linger), then N sending the preface      -> "answered A, ended E"
                 (A of the new ones got SETTINGS, E of the old ones were ended);
                 then it holds every socket until its stdin closes
  gzip:KIND     one gzip request message that does not decompress -> "status N"
                 and the start of its grpc-message ("status 8 decompressed request
                 message exceeds"): KIND is bomb (5 MiB of zeros), bigbomb (1 GiB),
                 corrupt, truncated, trailing (garbage after it), two (two gzip
                 members), crc (a wrong CRC-32), zlib, raw (deflate), empty (no
                 bytes), or fits101 (101 bytes, for max_receive_size 100)
  gzbidi        on /srv.Calc/Echo (bidi) one good message, its reply, then a gzip
                 bomb -> "reply then status N ..." as for gzip
  msgs:N:PATH   a call of PATH with N request messages (x = 1..N), then END_STREAM
                 -> "status N MESSAGE" as for gzip
  note:N:PATH   a call of PATH with one srv.Point whose note is N bytes
                 -> "status N MESSAGE" as for gzip
  partial:N:LEN:SECONDS  N calls of /srv.Calc/Echo, each sending all but the last byte of
                 a message of LEN bytes as the windows allow, for SECONDS -> "peak P,
                 A answered: CODES": the most bytes sent on streams not yet answered
                 (what the server held), then the grpc-status of each answered call
                 (sorted; "rst N" for a reset)
  stallbody:CTYPE  a call of /srv.Calc/Add with content-type CTYPE (Connect unary:
                 application/json) whose body's first byte comes, then nothing
                 -> "http STATUS BODY" (the answer's status and body)
  timeout:VALUE a unary call with grpc-timeout VALUE     -> "status N MESSAGE" as for gzip
  flags PATH HEX [ACCEPT]  a call of PATH with the request bytes HEX and
                 grpc-accept-encoding ACCEPT (none without) -> "encoding E
                 flags F,... status N": the response's grpc-encoding (or
                 "none") and each response message's compressed flag
                 (spec/interop_server_spec.lua)
"""
import gzip
import socket
import sys
import time
import zlib

import h2.config
import h2.connection
import h2.events
import h2.settings

PATH = "/srv.Calc/Add"


def headers(path=PATH, ctype="application/grpc", extra=()):
    h = [(":method", "POST"), (":scheme", "http"), (":path", path),
         (":authority", "127.0.0.1"), ("content-type", ctype), ("te", "trailers")]
    return h + list(extra)


def frame(body, flag=0, length=None):
    n = len(body) if length is None else length
    return bytes([flag]) + n.to_bytes(4, "big") + body


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        cfg = h2.config.H2Configuration(client_side=True, validate_outbound_headers=False,
                                        normalize_outbound_headers=False,
                                        validate_inbound_headers=False)
        self.conn = h2.connection.H2Connection(cfg)
        self.conn.initiate_connection()
        self.flush()
        self.received = 0

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def events(self, seconds=10, read=True):
        """Yields events until the connection closes or 'seconds' pass."""
        end = time.time() + seconds
        while time.time() < end:
            self.sock.settimeout(max(0.05, end - time.time()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return
            except ConnectionResetError:
                yield "closed"
                return
            if not data:
                yield "closed"
                return
            try:
                evs = self.conn.receive_data(data)
            except Exception:  # the server's bytes after our own misbehaviour
                yield "closed"
                return
            for ev in evs:
                if isinstance(ev, h2.events.DataReceived):
                    self.received += len(ev.data)
                    if read:
                        self.conn.acknowledge_received_data(ev.flow_controlled_length,
                                                            ev.stream_id)
                yield ev
            try:
                self.flush()
            except OSError:
                yield "closed"
                return


def answer(c, sid=1):
    """The first telling answer of stream 'sid' (or the connection)."""
    for ev in c.events():
        if ev == "closed":
            return "closed"
        if isinstance(ev, h2.events.ConnectionTerminated):
            return "goaway %d" % ev.error_code
        if isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
            return "rst %d" % ev.error_code
        if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)) \
                and ev.stream_id == sid:
            h = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                 for k, v in ev.headers}
            if "grpc-status" in h:
                return "status " + h["grpc-status"]
            if h.get(":status") != "200":
                return "http " + h[":status"]
    return "nothing"


def bad_gzip(kind):
    """A request message body of 'kind' (see gzip above)."""
    good = gzip.compress(b"\x08\x01")
    if kind == "bomb":
        return gzip.compress(b"\0" * (5 << 20))
    if kind == "bigbomb":
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = b"\0" * (1 << 20)
        return b"".join(z.compress(chunk) for _ in range(1024)) + z.flush()
    if kind == "corrupt":
        return good[:10] + b"\xff" * (len(good) - 10)
    if kind == "truncated":
        return good[:-4]
    if kind == "trailing":
        return good + b"junk"
    if kind == "two":
        return good + good
    if kind == "crc":
        return good[:-8] + bytes([good[-8] ^ 1]) + good[-7:]
    if kind == "zlib":
        return zlib.compress(b"\x08\x01")
    if kind == "raw":
        z = zlib.compressobj(6, zlib.DEFLATED, -15)
        return z.compress(b"\x08\x01") + z.flush()
    if kind == "empty":
        return b""
    if kind == "fits101":
        return gzip.compress(b"\x1a\x63" + b"n" * 99)  # note = 99 n's: 101 bytes
    raise ValueError("unknown gzip kind " + kind)


def gzip_answer(c, sid=1):
    """'status N MESSAGE' from the stream's trailers (or trailers-only
    headers), else what answer() saw."""
    for ev in c.events():
        if ev == "closed":
            return "closed"
        if isinstance(ev, h2.events.ConnectionTerminated):
            return "goaway %d" % ev.error_code
        if isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
            return "rst %d" % ev.error_code
        if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)) \
                and ev.stream_id == sid:
            h = {k.decode(): v.decode() for k, v in ev.headers}
            if "grpc-status" in h:
                return "status %s %s" % (h["grpc-status"], h.get("grpc-message", ""))
    return "nothing"


def send_windowed(c, pending):
    """Sends 'pending' on stream 1, then END_STREAM, as the server's windows
    open (h2 keeps to them); stops when they stay shut or the stream ends."""
    while pending:
        n = min(len(pending), c.conn.local_flow_control_window(1),
                c.conn.max_outbound_frame_size)
        if n == 0:
            for ev in c.events(seconds=1):
                if isinstance(ev, (h2.events.WindowUpdated, h2.events.StreamReset,
                                   h2.events.ResponseReceived)) or ev == "closed":
                    break
            if c.conn.local_flow_control_window(1) == 0:
                break
            continue
        c.conn.send_data(1, pending[:n], end_stream=n == len(pending))
        pending = pending[n:]
        c.flush()


def flood(c, send):
    for i in range(2000):
        send(i)
        try:
            c.flush()
        except OSError:
            break
    return answer(c, sid=-1)


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "garbage":
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\xff" * 100)
        data = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                data += d
        except (socket.timeout, ConnectionResetError):
            pass
        print("closed")
        return
    if mode == "silent":
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            while s.recv(65536):
                pass
            print("closed")
        except socket.timeout:
            print("still open")
        except ConnectionResetError:
            print("closed")
        return
    if mode.startswith("lingerfill:"):
        n = int(mode.split(":")[1])
        old = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\xff" * 100)
            old.append(s)
        for s in old:  # the GOAWAY, then the end of the server's sending side
            try:
                while s.recv(65536):
                    pass
            except (socket.timeout, ConnectionResetError):
                pass
        new, answered = [], 0
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            try:
                answered += len(s.recv(65536)) > 0
            except (socket.timeout, ConnectionResetError):
                pass
            new.append(s)
        ended = 0
        for s in old:  # a lingering socket the server closed resets a write
            try:
                s.send(b"x")
                time.sleep(0.05)
                s.send(b"x")
            except OSError:
                ended += 1
        print("answered %d, ended %d" % (answered, ended), flush=True)
        sys.stdin.read()
        return
    if mode == "twoconns":
        first = Client(port)
        for ev in first.events(seconds=3):
            if isinstance(ev, h2.events.RemoteSettingsChanged):
                break
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            print("second closed" if not s.recv(65536) else "second answered")
        except (socket.timeout, BrokenPipeError):
            print("second open")
        except ConnectionResetError:
            print("second closed")
        return
    c = Client(port)
    if mode == "preface":
        for ev in c.events(seconds=3):
            if isinstance(ev, h2.events.RemoteSettingsChanged):
                print("settings")
                return
        print("nothing")
    elif mode == "nopath":
        h = [kv for kv in headers() if kv[0] != ":path"]
        c.conn.send_headers(1, h, end_stream=True)
        c.flush()
        print(answer(c))
    elif mode == "unknown":
        c.conn.send_headers(1, headers(path="/srv.Calc/Nope"))
        c.conn.send_data(1, frame(b"\x08\x01"), end_stream=True)
        c.flush()
        print(answer(c))
    elif mode == "ctype":
        c.conn.send_headers(1, headers(ctype="text/plain"))
        c.conn.send_data(1, frame(b"\x08\x01"), end_stream=True)
        c.flush()
        print(answer(c))
    elif mode == "big":
        c.conn.send_headers(1, headers())
        c.conn.send_data(1, frame(b"\x08\x01", length=5 * 1024 * 1024))
        c.flush()
        print(answer(c))
    elif mode == "truncated":
        c.conn.send_headers(1, headers())
        c.conn.send_data(1, frame(b"\x08\x01", length=100), end_stream=True)
        c.flush()
        print(answer(c))
    elif mode == "encoding":
        c.conn.send_headers(1, headers(extra=[("grpc-encoding", "snappy")]))
        c.conn.send_data(1, frame(b"\x08\x01", flag=1), end_stream=True)
        c.flush()
        print(answer(c))
    elif mode == "undecodable":
        c.conn.send_headers(1, headers())
        c.conn.send_data(1, frame(b"\xff\xff\xff"), end_stream=True)
        c.flush()
        print(answer(c))
    elif mode == "rstflood":
        def send(i):
            sid = 1 + 2 * i
            c.conn.send_headers(sid, headers())
            c.conn.reset_stream(sid)
        print(flood(c, send))
    elif mode == "pingflood":
        print(flood(c, lambda i: c.conn.ping(i.to_bytes(8, "big"))))
    elif mode == "settingsflood":
        print(flood(c, lambda i: c.conn.update_settings({h2.settings.SettingCodes.ENABLE_PUSH: 0})))
    elif mode == "noread":
        c.conn.send_headers(1, headers(path="/srv.Calc/Count"))
        c.conn.send_data(1, frame(b"\x08" + varint(100000000)), end_stream=True)
        c.flush()
        for _ in c.events(seconds=2, read=False):
            pass
        print("held %d" % c.received)
    elif mode.startswith("gzip:"):
        body = bad_gzip(mode[5:])
        c.conn.send_headers(1, headers(extra=[("grpc-encoding", "gzip")]))
        c.flush()
        send_windowed(c, frame(body, flag=1))
        print(gzip_answer(c))
    elif mode.startswith("msgs:"):
        _, n, path = mode.split(":", 2)
        c.conn.send_headers(1, headers(path=path), end_stream=int(n) == 0)
        for i in range(int(n)):
            c.conn.send_data(1, frame(b"\x08" + varint(i + 1)), end_stream=i == int(n) - 1)
        c.flush()
        print(gzip_answer(c))
    elif mode.startswith("note:"):
        _, n, path = mode.split(":", 2)
        note = b"n" * int(n)
        c.conn.send_headers(1, headers(path=path))
        c.flush()
        send_windowed(c, frame(b"\x1a" + varint(len(note)) + note))
        print(gzip_answer(c))
    elif mode.startswith("partial:"):
        _, n, length, seconds = mode.split(":")
        n, length = int(n), int(length)
        sids = [1 + 2 * i for i in range(n)]
        pending, sent, answers = {}, {}, {}
        for sid in sids:
            c.conn.send_headers(sid, headers(path="/srv.Calc/Echo"))
            pending[sid] = frame(b"n" * (length - 1), length=length)
            sent[sid] = 0
        c.flush()
        peak, end = 0, time.time() + float(seconds)
        while time.time() < end and len(answers) < n:
            for sid in sids:  # in order, as far as the windows allow
                while sid not in answers and pending[sid]:
                    k = min(len(pending[sid]), c.conn.local_flow_control_window(sid),
                            c.conn.max_outbound_frame_size)
                    if k <= 0:
                        break
                    c.conn.send_data(sid, pending[sid][:k])
                    pending[sid] = pending[sid][k:]
                    sent[sid] += k
            c.flush()
            peak = max(peak, sum(sent[sid] for sid in sids if sid not in answers))
            for ev in c.events(seconds=0.1):
                if isinstance(ev, h2.events.StreamReset) and ev.stream_id not in answers:
                    answers[ev.stream_id] = "rst %d" % ev.error_code
                if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    h = {k.decode(): v.decode() for k, v in ev.headers}
                    if "grpc-status" in h:
                        answers[ev.stream_id] = "status " + h["grpc-status"]
                if ev == "closed":
                    end = 0
                    break
        codes = sorted(answers.values())
        print("peak %d, %d answered: %s" % (peak, len(answers), ", ".join(codes)))
    elif mode.startswith("stallbody:"):
        c.conn.send_headers(1, headers(ctype=mode[10:]))
        c.conn.send_data(1, b"{")
        c.flush()
        status, body = None, b""
        for ev in c.events():
            if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == 1:
                status = dict(ev.headers).get(b":status", b"").decode()
            if isinstance(ev, h2.events.DataReceived) and ev.stream_id == 1:
                body += ev.data
            if ev == "closed" or isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)) \
                    and ev.stream_id == 1:
                break
        print("http %s %s" % (status, body.decode()))
    elif mode.startswith("timeout:"):
        c.conn.send_headers(1, headers(extra=[("grpc-timeout", mode[8:])]))
        c.conn.send_data(1, frame(b"\x08\x01"), end_stream=True)
        c.flush()
        print(gzip_answer(c))
    elif mode == "gzbidi":
        c.conn.send_headers(1, headers(path="/srv.Calc/Echo", extra=[("grpc-encoding", "gzip")]))
        c.conn.send_data(1, frame(gzip.compress(b"\x08\x05"), flag=1))
        c.flush()
        replied = False
        for ev in c.events():
            if isinstance(ev, h2.events.DataReceived) and ev.stream_id == 1:
                replied = True
                break
            if ev == "closed" or isinstance(ev, (h2.events.StreamReset,
                                                 h2.events.ConnectionTerminated)):
                break
        if not replied:
            print("no reply")
            return
        c.conn.send_data(1, frame(bad_gzip("bomb"), flag=1), end_stream=True)
        c.flush()
        print("reply then " + gzip_answer(c))
    elif mode == "flags":
        extra = [("grpc-accept-encoding", sys.argv[5])] if len(sys.argv) > 5 else []
        c.conn.send_headers(1, headers(path=sys.argv[3], extra=extra))
        c.conn.send_data(1, frame(bytes.fromhex(sys.argv[4])), end_stream=True)
        c.flush()
        body, encoding, status = b"", "none", "none"
        for ev in c.events():
            if isinstance(ev, h2.events.DataReceived) and ev.stream_id == 1:
                body += ev.data
            if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                h = {k.decode(): v.decode() for k, v in ev.headers}
                encoding = h.get("grpc-encoding", encoding)
                status = h.get("grpc-status", status)
            if isinstance(ev, h2.events.StreamEnded) or ev == "closed":
                break
        flags = []
        while len(body) >= 5:
            flags.append(str(body[0]))
            body = body[5 + int.from_bytes(body[1:5], "big"):]
        print("encoding %s flags %s status %s" % (encoding, ",".join(flags), status))
    else:
        print("unknown mode " + mode)


if __name__ == "__main__":
    main()
