#!/usr/bin/python3
"""Differential oracle for protocall's HTTP/1.1 parser: Debian's python3-h11.

Run with /usr/bin/python3 (Debian's python3-h11). The C side is
core/net/http1_test.c run with the argument "diff" (ctest net.http1_diff).

  http1_diff.py gen OUT --seed N --count N
      Writes OUT as lines "id<TAB>role<TAB>head<TAB>hex": role "q" for a
      byte stream of requests (a server parses it), "s" for responses (a
      client parses it; head "1": they answer HEAD requests). Seeded random
      messages, valid and hostile: pipelined requests and responses,
      Content-Length and chunked bodies (extensions, trailers), bodies until
      close, 1xx, 204, 304, HEAD, HTTP/1.0 and 1.1, keep-alive and close;
      then smuggling cases (duplicate and conflicting Content-Length,
      Transfer-Encoding with Content-Length, codings other than chunked),
      obs-fold, bare LF and CR, whitespace before the colon, control bytes,
      bad and huge chunk sizes, bad versions and start lines, Host rules,
      truncation and random byte edits.
  http1_diff.py check CASES OURS
      OURS has lines "id<TAB>events" (JSON, protocall's parse). h11 parses
      every case too (as a server for requests, a client for responses,
      answering each message so the next may follow, then the end of the
      input). Both event lists are put in one form and compared: equal, or
      both failing at the same point, is agreement. Where one side fails
      and the other goes on, the difference must be one of the listed
      choices (DIFFERENCES below), each with its reason; anything else is
      reported and the exit status is 1. Prints the tally last.
"""
import json
import random
import re
import sys

# -- the listed differences ------------------------------------------------

# Where protocall refuses what h11 accepts: (status, reason) of protocall's
# error -> why.
OURS_STRICTER = {
    ("BadLineEnd", "bare LF"):
        "a bare LF ends a line for h11 (RFC 9112 2.2 allows it); protocall refuses it anywhere, "
        "since parsers that disagree on line ends disagree on where a message ends",
    ("BadLineEnd", "bare CR"):
        "h11 lets a CR through inside a chunk extension; protocall refuses a CR not before LF",
    ("ObsFold", "line folding (obs-fold)"):
        "h11 unfolds obs-fold; protocall refuses it (RFC 9112 5.2 lets a server reject it)",
    ("BadField", "control byte in a field value"):
        "h11 accepts control bytes other than NUL, HTAB, LF, VT, FF, CR in values (its issue "
        "#57); protocall keeps to RFC 9110 5.5 (VCHAR, obs-text, SP, HTAB)",
    ("BadStartLine", "control byte in the reason phrase"):
        "the same for a reason phrase (RFC 9112 4: HTAB, SP, VCHAR, obs-text)",
    ("BadChunk", "control byte in a chunk extension"):
        "h11 skips any byte but LF in a chunk extension; protocall only VCHAR, obs-text, SP, HTAB",
    ("BadChunk", "whitespace after the chunk size"):
        "h11 allows whitespace at the end of a chunk-size line; the grammar (RFC 9112 7.1) "
        "has it only before a ';'",
    ("AmbiguousLength", "Transfer-Encoding with Content-Length"):
        "h11 frames by Transfer-Encoding; protocall takes RFC 9112 6.1's strict choice and "
        "refuses the message",
    ("BadTransferEncoding", "Transfer-Encoding in HTTP/1.0"):
        "RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message means faulty framing; h11 "
        "frames it as chunked",
    ("BadVersion", "HTTP version other than 1.0 and 1.1"):
        "h11 accepts any HTTP/d.d; protocall speaks 1.0 and 1.1 only (a server answers 505)",
    ("ContentTooLarge", "Content-Length over the limit"):
        "a limit (max_content_length, 64 MiB by default); h11 has none",
    ("ContentTooLarge", "chunk size over the limit"):
        "the same limit on one chunk's size",
    ("BadContentLength", "Content-Length overflows"):
        "beyond 2^63-1; h11 takes any integer",
}

# Where h11 refuses what protocall accepts: a pattern of h11's message -> why.
# (Where h11's message quotes the line, the pattern also checks the line.)
H11_STRICTER = [
    (r"^(no request line received|illegal request line)$",
     "empty lines before a request line: protocall skips them (RFC 9112 2.2: a server SHOULD "
     "ignore at least one), h11 refuses them"),
    (r"^illegal chunk header: bytearray\(b'[0-9A-Fa-f]{21,}",
     "h11 takes at most 20 hex digits in a chunk size; protocall takes leading zeros up to "
     "max_chunk_line"),
    (r"^illegal chunk header: bytearray\(b'[0-9A-Fa-f]+[ \\t]+;",
     "h11 refuses whitespace before a chunk extension's ';' (BWS in RFC 9112 7.1.1)"),
]

# -- generating ------------------------------------------------------------

TCHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "M-SEARCH", "PROPFIND"]
NAMES = ["Accept", "User-Agent", "Content-Type", "X-Request-Id", "Cookie", "Accept-Encoding",
         "Connect-Protocol-Version", "X-Grpc-Web", "Grpc-Timeout", "Te", "Origin", "Via"]
REASONS = {200: "OK", 201: "Created", 204: "No Content", 206: "Partial Content",
           301: "Moved Permanently", 304: "Not Modified", 400: "Bad Request", 404: "Not Found",
           500: "Internal Server Error", 503: "Service Unavailable", 100: "Continue",
           103: "Early Hints", 199: "", 299: "", 599: "", 999: ""}
CTLS = [0, 1, 8, 0x0b, 0x0c, 0x0e, 0x1f, 0x7f]


def token(rng, lo=1, hi=12):
    return "".join(rng.choice(TCHARS) for _ in range(rng.randint(lo, hi)))


def value(rng):
    r = rng.random()
    if r < 0.1:
        return b""
    if r < 0.2:
        return bytes(rng.choice(range(0x80, 0x100)) for _ in range(rng.randint(1, 6)))
    words = [bytes(rng.choice(range(0x21, 0x7f)) for _ in range(rng.randint(1, 8)))
             for _ in range(rng.randint(1, 3))]
    return b" ".join(words)


class Msg:
    """A message as parts a mutation can reach: head lines (start line
    first) and their line ends, then the body parts."""

    def __init__(self):
        self.lines = []  # bytes, without the line end
        self.eols = []   # each line's end; the blank line's is last
        self.body = []   # bytes pieces (chunks keep their own line ends)

    def add(self, line):
        self.lines.append(line)
        self.eols.append(b"\r\n")

    def render(self):
        out = b"".join(l + e for l, e in zip(self.lines, self.eols))
        return out + self.eols[-1] + b"".join(self.body)


def fields(rng, n_extra):
    out = []
    for _ in range(n_extra):
        name = rng.choice(NAMES) if rng.random() < 0.6 else token(rng)
        if name.lower() in ("host", "content-length", "transfer-encoding", "connection",
                            "upgrade", "expect"):
            name = "X-" + name
        out.append((name.encode(), value(rng)))
    return out


def chunked_body(rng, m, payload):
    """Chunks of 'payload', perhaps with extensions and trailers."""
    pos = 0
    while pos < len(payload):
        n = rng.randint(1, max(1, len(payload) - pos))
        size = "%x" % n if rng.random() < 0.7 else "%X" % n
        if rng.random() < 0.1:
            size = "0" * rng.randint(1, 4) + size
        ext = b""
        if rng.random() < 0.2:
            ext = rng.choice([b";a=1", b";name", b'; q="x y"', b";a;b=c", b";a=\x80"])
        m.body.append(size.encode() + ext + b"\r\n" + payload[pos:pos + n] + b"\r\n")
        pos += n
    last = b"0" + (b";end" if rng.random() < 0.1 else b"") + b"\r\n"
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        last += token(rng).encode() + b": " + value(rng).strip() + b"\r\n"
    m.body.append(last + b"\r\n")


def request(rng):
    m = Msg()
    ver = "1.1" if rng.random() < 0.85 else "1.0"
    target = rng.choice(["/", "/pkg.Service/Method", "/a/b?c=d&e=f", "*", "http://x.test/p",
                         "/" + token(rng)])
    m.add(("%s %s HTTP/%s" % (rng.choice(METHODS), target, ver)).encode())
    fs = fields(rng, rng.randint(0, 5))
    if ver == "1.1" or rng.random() < 0.5:
        fs.insert(rng.randint(0, len(fs)), (b"Host", b"example.test:8080"))
    r = rng.random()
    if r < 0.1:
        fs.append((b"Connection", rng.choice([b"close", b"keep-alive, close", b"Close"])))
    elif r < 0.2:
        fs.append((b"Connection", b"keep-alive"))
    if rng.random() < 0.05:
        fs.append((b"Expect", b"100-continue"))
    payload = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    framing = rng.choice(["none", "length", "chunked"]) if ver == "1.1" else \
        rng.choice(["none", "length"])
    if framing == "length":
        fs.insert(rng.randint(0, len(fs)), (b"Content-Length", str(len(payload)).encode()))
        m.body.append(payload)
    elif framing == "chunked":
        fs.insert(rng.randint(0, len(fs)), (b"Transfer-Encoding", b"chunked"))
        chunked_body(rng, m, payload)
    for n, v in fs:
        m.add(n + b": " + v)
    return m


def response(rng, head, last):
    """A final response (after 1xx ones, sometimes)."""
    msgs = []
    while rng.random() < 0.15:
        info = Msg()
        st = rng.choice([100, 103, 199])
        info.add(("HTTP/1.1 %d %s" % (st, REASONS[st])).encode())
        for n, v in fields(rng, rng.randint(0, 2)):
            info.add(n + b": " + v)
        msgs.append(info)
    m = Msg()
    ver = "1.1" if rng.random() < 0.85 else "1.0"
    st = rng.choice([200, 200, 200, 201, 204, 206, 301, 304, 400, 404, 500, 503, 299, 599, 999])
    reason = REASONS[st]
    r = rng.random()
    start = "HTTP/%s %d %s" % (ver, st, reason)
    if r < 0.1:
        start = "HTTP/%s %d" % (ver, st)
    elif r < 0.15:
        start = "HTTP/%s %d " % (ver, st)
    m.add(start.encode())
    fs = fields(rng, rng.randint(0, 5))
    if rng.random() < 0.1:
        fs.append((b"Connection", b"close"))
    payload = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    bodiless = head or st in (204, 304)
    choices = ["length", "chunked"] if ver == "1.1" else ["length"]
    if last:
        choices.append("close")
    framing = rng.choice(choices)
    if framing == "length":
        fs.insert(rng.randint(0, len(fs)), (b"Content-Length", str(len(payload)).encode()))
        if not bodiless:
            m.body.append(payload)
    elif framing == "chunked":
        fs.insert(rng.randint(0, len(fs)), (b"Transfer-Encoding", b"chunked"))
        if not bodiless:
            chunked_body(rng, m, payload)
    elif not bodiless:
        m.body.append(payload)
    for n, v in fs:
        m.add(n + b": " + v)
    msgs.append(m)
    return msgs


def field_index(rng, m):
    return rng.randrange(1, len(m.lines)) if len(m.lines) > 1 else None


def set_field(m, name, val):
    m.add(name + b": " + val)


def mutate(rng, m, role):
    """One hostile change to 'm'."""
    kind = rng.randrange(24)
    i = field_index(rng, m)
    if kind == 0:  # bare LF at a head line end
        m.eols[rng.randrange(len(m.eols))] = b"\n"
    elif kind == 1:  # bare CR
        m.eols[rng.randrange(len(m.eols))] = rng.choice([b"\r", b"\r\r\n", b"\n\r"])
    elif kind == 2 and i is not None:  # obs-fold
        m.lines.insert(i + 1, rng.choice([b" folded", b"\tfolded", b"  "]))
        m.eols.insert(i + 1, b"\r\n")
    elif kind == 3 and i is not None:  # whitespace before the colon, or in the name
        n, _, v = m.lines[i].partition(b":")
        m.lines[i] = n + rng.choice([b" ", b"\t", b"  "]) + b":" + v
    elif kind == 4 and i is not None:  # a control byte in a value
        m.lines[i] = m.lines[i] + b"x" + bytes([rng.choice(CTLS)]) + b"y"
    elif kind == 5:  # Content-Length repeated, same or different
        a = rng.randint(0, 20)
        b = a if rng.random() < 0.5 else rng.randint(0, 20)
        if rng.random() < 0.5:
            set_field(m, b"Content-Length", b"%d" % a)
            set_field(m, b"content-length", b"%d" % b)
        else:
            set_field(m, b"Content-Length", b"%d,%s%d" % (a, rng.choice([b"", b" ", b"\t"]), b))
    elif kind == 6:  # Content-Length not digits, or huge
        set_field(m, b"Content-Length", rng.choice(
            [b"+5", b"-1", b"5a", b"0x5", b"", b"5 5", b"1,", b",1", b"99999999999999999999999",
             b"9223372036854775808", b"67108865", b"00000000000000000000000005"]))
    elif kind == 7:  # Transfer-Encoding with Content-Length
        set_field(m, b"Transfer-Encoding", b"chunked")
        set_field(m, b"Content-Length", b"%d" % rng.randint(0, 30))
    elif kind == 8:  # Transfer-Encoding: codings, case, repeats
        v = rng.choice([b"gzip", b"gzip, chunked", b"chunked, chunked", b"CHUNKED", b"Chunked",
                        b"chunked;q=1", b'"chunked"', b"identity", b"chunked ,", b"x-chunked"])
        set_field(m, b"Transfer-Encoding", v)
        if rng.random() < 0.3:
            set_field(m, b"Transfer-Encoding", b"chunked")
    elif kind == 9 and m.body:  # chunk sizes and chunk ends
        j = rng.randrange(len(m.body))
        piece = m.body[j]
        repl = rng.choice([b"g", b"0x5", b"-1", b" 5", b"5 ", b"5\t", b"ffffffffffffffffffffff",
                           b"fffffff", b"7fffffffffffffff", b"10000000000000000", b"5;\x01",
                           b"5;a\rb", b"3;a=b\n", b"00000000000000000000001", b"1 ;x"])
        lf = piece.find(b"\r\n")
        if lf >= 0:
            m.body[j] = repl + piece[lf:]
        else:
            m.body[j] = repl + b"\r\n" + piece
    elif kind == 10 and m.body:  # chunk data longer or shorter than its size
        j = rng.randrange(len(m.body))
        m.body[j] = m.body[j].replace(b"\r\n", rng.choice([b"x\r\n", b"\n", b"\r\r\n"]), 2)
    elif kind == 11:  # versions
        line = m.lines[0]
        v = rng.choice([b"HTTP/1.2", b"HTTP/2.0", b"HTTP/0.9", b"http/1.1", b"HTTP/1.1 ",
                        b"HTTP/1", b"HTTP/11", b"HTTP/1.10", b"HTTP /1.1"])
        if role == "q":
            m.lines[0] = line[:line.rfind(b" ") + 1] + v
        else:
            m.lines[0] = v + line[8:]
    elif kind == 12 and role == "q":  # Host rules
        if rng.random() < 0.5:
            keep = [k for k in range(1, len(m.lines)) if not m.lines[k].lower().startswith(b"host:")]
            m.lines = [m.lines[0]] + [m.lines[k] for k in keep]
            m.eols = [m.eols[0]] + [m.eols[k] for k in keep] + [m.eols[-1]]
        else:
            set_field(m, rng.choice([b"Host", b"host", b"HOST"]), b"other.test")
    elif kind == 13 and role == "q":  # empty lines before the request line
        m.lines[0] = rng.choice([b"\r\n", b"\r\n\r\n", b"\n", b" "]) + m.lines[0]
    elif kind == 14 and role == "q":  # the request line
        line = m.lines[0]
        m.lines[0] = rng.choice([line.replace(b" ", b"  ", 1), line.replace(b" ", b"\t", 1),
                                 line.replace(b"/", b"/\x80", 1), line.replace(b"/", b"/ x", 1),
                                 b"G\x00T" + line[3:], line + b" extra"])
    elif kind == 15 and role == "s":  # the status line
        line = m.lines[0]
        m.lines[0] = rng.choice([line[:11], line[:12] + b"0" + line[12:], line.replace(b" ", b"  ", 1),
                                 line[:9] + b"2x0" + line[12:], line[:9] + b"099" + line[12:],
                                 line[:9] + b"101" + line[12:], line + b"\x01", line + b"\t\xff"])
    elif kind == 16 and i is not None:  # field names
        n, _, v = m.lines[i].partition(b":")
        m.lines[i] = rng.choice([b"", b"X@Y", b"X Y", b"\x80x", b"X\"", b"(x)"]) + b":" + v
    elif kind == 17 and i is not None:  # no colon
        m.lines[i] = m.lines[i].replace(b":", b"", 1)
    elif kind == 18:  # Transfer-Encoding in HTTP/1.0
        m.lines[0] = m.lines[0].replace(b"HTTP/1.1", b"HTTP/1.0")
        set_field(m, b"Transfer-Encoding", b"chunked")
    elif kind == 19 and i is not None:  # whitespace around values
        n, _, v = m.lines[i].partition(b":")
        m.lines[i] = n + b":" + rng.choice([b"", b"\t", b"   "]) + v.strip() + \
            rng.choice([b"", b" ", b"\t \t"])
    elif kind == 20:  # Connection options
        set_field(m, b"Connection", rng.choice([b"close", b"CLOSE", b"foo, close ,bar", b"closed",
                                                b"keep-alive", b""]))
    elif kind == 21 and i is not None:  # a NUL or DEL in a name or value
        m.lines[i] = m.lines[i].replace(b":", rng.choice([b":\x00", b"\x00:", b":\x7f"]), 1)


def edit_bytes(rng, data):
    """A few random byte edits (replace, insert, delete)."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        if not data:
            break
        k = rng.randrange(len(data))
        op = rng.randrange(3)
        c = rng.choice([0x0d, 0x0a, 0x20, 0x09, 0x3a, 0x3b, 0x30, 0x61, 0x00, 0x7f, 0xff,
                        rng.randrange(256)])
        if op == 0:
            data[k] = c
        elif op == 1:
            data.insert(k, c)
        else:
            del data[k]
    return bytes(data)


def gen_case(rng):
    role = "q" if rng.random() < 0.55 else "s"
    head = role == "s" and rng.random() < 0.15
    n = rng.choice([1, 1, 1, 2, 2, 3])
    msgs = []
    for k in range(n):
        if role == "q":
            msgs.append(request(rng))
        else:
            msgs.extend(response(rng, head, k == n - 1))
    hostile = rng.random() < 0.6
    if hostile:
        for _ in range(rng.choice([1, 1, 1, 2])):
            mutate(rng, rng.choice(msgs), role)
    data = b"".join(m.render() for m in msgs)
    r = rng.random()
    if hostile and r < 0.1:
        data = data[:rng.randrange(len(data) + 1)]
    elif hostile and r < 0.25:
        data = edit_bytes(rng, data)
    return role, head, data


def gen(out, seed, count):
    rng = random.Random(seed)
    with open(out, "w") as f:
        for i in range(count):
            role, head, data = gen_case(rng)
            f.write("%d\t%s\t%d\t%s\n" % (i, role, 1 if head else 0, data.hex()))


# -- h11's parse -----------------------------------------------------------


def h11_fields(items):
    return [(bytes(n).hex(), bytes(v).hex()) for n, v in items]


def h11_framing(conn):
    r = getattr(conn, "_reader", None)
    name = type(r).__name__
    if name == "ContentLengthReader":
        return ("length", r._length)
    if name == "ChunkedReader":
        return ("chunked",)
    if name == "Http10Reader":
        return ("close",)
    return (name,)


def h11_parse(role, head, data):
    """h11's events, in the normalized form (see ours())."""
    import h11
    out = []
    body = bytearray()

    def flush():
        if body:
            out.append(("body", bytes(body).hex()))
            body.clear()

    def ask(c):
        c.send(h11.Request(method="HEAD" if head else "GET", target="/",
                           headers=[("Host", "example.test")]))
        c.send(h11.EndOfMessage())

    if role == "q":
        conn = h11.Connection(h11.SERVER)
    else:
        conn = h11.Connection(h11.CLIENT)
        if data:  # as after each response: a request only for a response to come
            ask(conn)
    conn.receive_data(data)
    eof = False
    try:
        for _ in range(100000):
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                if eof:
                    break
                conn.receive_data(b"")
                eof = True
                continue
            if ev is h11.PAUSED:
                out.append(("paused",))
                break
            if isinstance(ev, h11.Request):
                out.append(("head", ev.method.hex(), ev.target.hex(), ev.http_version.decode(),
                            h11_fields(ev.headers.raw_items()), h11_framing(conn)))
            elif isinstance(ev, h11.InformationalResponse):
                out.append(("info", ev.status_code, ev.reason.hex(), ev.http_version.decode(),
                            h11_fields(ev.headers.raw_items())))
            elif isinstance(ev, h11.Response):
                out.append(("head", ev.status_code, ev.reason.hex(), ev.http_version.decode(),
                            h11_fields(ev.headers.raw_items()), h11_framing(conn)))
            elif isinstance(ev, h11.Data):
                body.extend(ev.data)
            elif isinstance(ev, h11.EndOfMessage):
                flush()
                if ev.headers:
                    out.append(("trailers", h11_fields(ev.headers.raw_items())))
                out.append(("end",))
                if role == "q":
                    conn.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
                    conn.send(h11.EndOfMessage())
                # A body read until close leaves h11 DONE; the connection is
                # over all the same.
                heads = [e for e in out if e[0] == "head"]
                until_close = bool(heads) and heads[-1][-1] == ("close",)
                if conn.our_state is h11.DONE and conn.their_state is h11.DONE and \
                        not until_close:
                    conn.start_next_cycle()
                    if role == "s" and conn.trailing_data[0]:
                        ask(conn)  # only for a response still to come
                else:
                    out.append(("close",))
            elif isinstance(ev, h11.ConnectionClosed):
                flush()
                out.append(("closed",))
                break
    except (h11.RemoteProtocolError, h11.LocalProtocolError) as e:
        flush()
        out.append(("error", str(e)))
    return out


# -- protocall's parse, in the same form -----------------------------------


def norm_fields(fields):
    """As h11 hands fields out: one Content-Length (the first, its single
    value), Transfer-Encoding's value in lower case."""
    out, seen = [], False
    for n, v in fields:
        nb, vb = bytes.fromhex(n), bytes.fromhex(v)
        low = nb.lower()
        if low == b"content-length":
            if seen:
                continue
            seen = True
            vb = vb.split(b",")[0].strip(b" \t")
        elif low == b"transfer-encoding":
            vb = vb.lower()
        out.append((nb.hex(), vb.hex()))
    return out


def ours(events):
    out = []
    for e in events:
        k = e[0]
        if k == "head":
            kind, cl = e[5], e[6]
            framing = {"none": ("length", 0), "length": ("length", cl), "chunked": ("chunked",),
                       "close": ("close",)}[kind]
            out.append(("head", e[1], e[2], e[3], norm_fields(e[4]), framing))
        elif k == "info":
            out.append(("info", e[1], e[2], e[3], norm_fields(e[4])))
        elif k == "body":
            out.append(("body", e[1]))
        elif k == "trailers":
            out.append(("trailers", norm_fields(e[1])))
        elif k == "error":
            out.append(("error", e[1], e[2], e[3]))
        else:
            out.append((k,))
    return out


def jsonish(x):
    return json.loads(json.dumps(x))


def compare(a, b):
    """(verdict, detail): 'same', 'ours' (protocall failed first, detail
    its (status, reason)), 'h11' (h11 failed first, detail its message),
    'differ' (detail the index)."""
    a, b = jsonish(a), jsonish(b)
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x is not None and y is not None and x[0] == "error" and y[0] == "error":
            return "same", None
        if x == y:
            continue
        if x is not None and y is not None and x[0] == y[0] == "body":
            # One side stopped inside the body: the one whose body is a
            # prefix of the other's, and which fails next.
            if x[1].startswith(y[1]) and i + 1 < len(b) and b[i + 1][0] == "error":
                return "h11", b[i + 1][1]
            if y[1].startswith(x[1]) and i + 1 < len(a) and a[i + 1][0] == "error":
                return "ours", (a[i + 1][1], a[i + 1][2])
        if x is not None and x[0] == "error":
            return "ours", (x[1], x[2])
        if y is not None and y[0] == "error":
            return "h11", y[1]
        return "differ", i
    return "same", None


def check(cases_path, ours_path):
    cases = {}
    with open(cases_path) as f:
        for line in f:
            i, role, head, hexdata = line.rstrip("\n").split("\t")
            cases[i] = (role, head == "1", bytes.fromhex(hexdata))
    tally = {"same": 0}
    listed = {}
    bad = 0
    n = 0
    with open(ours_path) as f:
        for line in f:
            i, js = line.rstrip("\n").split("\t", 1)
            role, head, data = cases.pop(i)
            mine = ours(json.loads(js))
            theirs = h11_parse(role, head, data)
            verdict, detail = compare(mine, theirs)
            n += 1
            if verdict == "same":
                tally["same"] += 1
                if mine and mine[-1][0] == "error":
                    tally["refused"] = tally.get("refused", 0) + 1
                continue
            why = None
            if verdict == "ours":
                why = OURS_STRICTER.get(tuple(detail))
                key = "protocall refuses: %s (%s)" % tuple(detail)
            elif verdict == "h11":
                for pat, reason in H11_STRICTER:
                    if re.search(pat, detail):
                        why, key = reason, "h11 refuses: %s" % pat
                        break
            if why is None:
                bad += 1
                print("case %s (%s%s): %s %r\n  input %r\n  protocall %s\n  h11       %s" %
                      (i, role, " HEAD" if head else "", verdict, detail, data, mine, theirs))
                continue
            listed.setdefault(key, [why, 0])[1] += 1
    for key, (why, count) in sorted(listed.items()):
        print("listed difference, %d cases: %s\n    %s" % (count, key, why))
    if cases:
        print("%d cases protocall did not parse" % len(cases))
        bad += len(cases)
    print("%d cases: %d agree (%d of them refused by both at the same point), %d listed "
          "differences, %d unexplained" % (n, tally["same"], tally.get("refused", 0),
                                          sum(c for _, c in listed.values()), bad))
    return 1 if bad else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "gen":
        seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 1
        count = int(argv[argv.index("--count") + 1]) if "--count" in argv else 4000
        gen(argv[2], seed, count)
        return 0
    if len(argv) == 4 and argv[1] == "check":
        return check(argv[2], argv[3])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
