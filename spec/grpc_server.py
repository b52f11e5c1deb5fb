"""Test servers for spec/grpc_spec.lua, run with Debian's /usr/bin/python3.

    grpc_server.py grpc PORT     a real gRPC server (python3-grpcio), service test.Test
    grpc_server.py tls PORT CERT KEY   the same over TLS with that certificate (PEM files)
    grpc_server.py h2 PORT       a scripted HTTP/2 peer (python3-h2) for replies
                                 grpcio will not produce (HTTP errors, RST_STREAM, ...)
    grpc_server.py garbage PORT  answers every connection with bytes that are not HTTP/2
    grpc_server.py silent PORT [COUNT_FILE [CERT KEY]]   accepts connections and never
                                 answers; COUNT_FILE: after each connection and each read,
                                 "CONNECTIONS BYTES" (so far) written there; CERT KEY: a TLS
                                 handshake first (ALPN h2), then silence (a TLS-terminating box
                                 forwarding to nothing)
    grpc_server.py hangup PORT   reads what a connection sends first, then closes it (an
                                 HTTP/1.1-only server dropping HTTP/2's client preface)
    grpc_server.py http1 PORT    reads what a connection sends first, answers an HTTP/1.1
                                 400 and closes it (nginx or python's http.server meeting
                                 HTTP/2's client preface)
    grpc_server.py late PORT SECONDS UPSTREAM   accepts, waits SECONDS, then relays the
                                 connection both ways to 127.0.0.1:UPSTREAM (a server whose
                                 HTTP/2 SETTINGS come late)
    grpc_server.py client PORT SIZE SECONDS   (for bench/) python3-grpcio client calling
                                 test.Test/Echo with SIZE bytes for SECONDS; prints calls/s

PORT 0 picks a free loopback port; PC_SERVER_ADDRESS (e.g. unix:/tmp/x.sock)
makes the grpc and tls modes bind that address instead. The grpc and tls modes run calls on
PC_SERVER_WORKERS threads (16 unless set; spec/nginx_spec.lua needs 50 at once). The first line printed is "PORT PID".
Every server exits when its standard input reaches end of file (the spec
holds the writing end: io.popen(cmd, "w")), so a spec that fails or dies
cannot leave it running, and after PC_SERVER_LIFETIME seconds (120 unless set) in any case.

Requests and responses of test.Test are raw bytes (no codegen, no
messages): the request's text is the argument, as each method says. The
grpc and tls modes also serve faults.Faults, a message service
(spec/fixtures/protos/grpc/faults.proto, compiled by protoc at start-up,
message classes from python3-protobuf's message_factory), and faults.Talk
(service Talk { rpc Chat(stream Request) returns (stream Reply); }, which
spec/client_grpc_spec.lua declares itself).

    grpc_server.py client PORT SIZE SECONDS PATH   the same client calling
                                 PATH with a message whose field 1 holds SIZE
                                 bytes (faults.Request.text, bench.Msg.data)
"""
import base64
import os
import socket
import sys
import threading
import time


ADDRESS = os.environ.get("PC_SERVER_ADDRESS")


def watch_stdin():
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


def lifetime():
    """A last safety net besides watch_stdin: exit after PC_SERVER_LIFETIME
    seconds (120 by default; `make memcheck` sets more, the spec suite runs
    for many minutes under valgrind)."""
    time.sleep(float(os.environ.get("PC_SERVER_LIFETIME", "120")))
    os._exit(0)


def announce(port):
    sys.stdout.write("%d %d\n" % (port, os.getpid()))
    sys.stdout.flush()


# -- grpc: python3-grpcio, generic handlers on raw bytes ----------------------

def serve_grpc(port, tls=None):
    from concurrent import futures
    import grpc

    failures = {}
    lock = threading.Lock()

    def echo(request, ctx):
        """Echo: the request bytes back."""
        return request

    def fail_then_succeed(request, ctx):
        """"ID N CODE": fails N times with CODE (per ID), then returns b"ok after N"."""
        key, n, code = request.decode().split()
        with lock:
            seen = failures.get(key, 0)
            failures[key] = seen + 1
        if seen < int(n):
            ctx.abort(grpc.StatusCode[code], "failure %d of %s" % (seen + 1, n))
        return b"ok after %d" % seen

    def sleep(request, ctx):
        """"SECONDS": sleeps, then returns b"slept" (stops early when cancelled)."""
        end = time.monotonic() + float(request.decode())
        while time.monotonic() < end and ctx.is_active():
            time.sleep(0.01)
        return b"slept"

    def stream(request, ctx):
        """"N": N responses b"message I" (server streaming)."""
        for i in range(int(request.decode())):
            yield b"message %d" % (i + 1)

    def stream_sized(request, ctx):
        """"N SIZE [MS]": N responses b"message I" padded with '.' to SIZE
        bytes, MS milliseconds apart (default 0)."""
        n, size, ms = ([int(x) for x in request.decode().split()] + [0])[:3]
        for i in range(n):
            if ms:
                time.sleep(ms / 1000)
            yield (b"message %d " % (i + 1)).ljust(size, b".")

    def stream_then_fail(request, ctx):
        """"N CODE": N responses, then status CODE."""
        n, code = request.decode().split()
        for i in range(int(n)):
            yield b"message %d" % (i + 1)
        ctx.abort(grpc.StatusCode[code], "stream failed after %s" % n)

    def metadata(request, ctx):
        """Request metadata whose key starts with "x-" back as response
        headers and trailers (trailer keys get a "t-" prefix)."""
        md = [(k, v) for k, v in ctx.invocation_metadata() if k.startswith("x-")]
        ctx.send_initial_metadata(md)
        ctx.set_trailing_metadata([("t-" + k, v) for k, v in md])
        return b"%d" % len(md)

    def compressed(request, ctx):
        """"TEXT": TEXT repeated 100 times, sent gzip-compressed."""
        ctx.set_compression(grpc.Compression.Gzip)
        return request * 100

    def big(request, ctx):
        """"N": N bytes of b"x"."""
        return b"x" * int(request.decode())

    def peer(request, ctx):
        """The client's address and port: equal for calls on one connection."""
        return ctx.peer().encode()

    def fail_with(request, ctx):
        """"CODE MESSAGE...": status CODE with MESSAGE (any text)."""
        code, _, message = request.decode().partition(" ")
        ctx.abort(grpc.StatusCode[code], message)

    def collect(requests, ctx):
        """Client streaming: the request messages joined with b","."""
        return b",".join(requests)

    def chat(requests, ctx):
        """Bidirectional: sends header x-chat: 1, then b"re:" + each request
        as it comes; a request b"fail" ends the call ABORTED."""
        ctx.send_initial_metadata([("x-chat", "1")])
        for r in requests:
            if r == b"fail":
                ctx.abort(grpc.StatusCode.ABORTED, "asked to fail")
            yield b"re:" + r

    raw_handlers = {
        "Collect": grpc.stream_unary_rpc_method_handler(collect),
        "Chat": grpc.stream_stream_rpc_method_handler(chat),
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
        "FailThenSucceed": grpc.unary_unary_rpc_method_handler(fail_then_succeed),
        "Sleep": grpc.unary_unary_rpc_method_handler(sleep),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
        "StreamThenFail": grpc.unary_stream_rpc_method_handler(stream_then_fail),
        "StreamSized": grpc.unary_stream_rpc_method_handler(stream_sized),
        "Metadata": grpc.unary_unary_rpc_method_handler(metadata),
        "Compressed": grpc.unary_unary_rpc_method_handler(compressed),
        "Big": grpc.unary_unary_rpc_method_handler(big),
        "FailWith": grpc.unary_unary_rpc_method_handler(fail_with),
        "Peer": grpc.unary_unary_rpc_method_handler(peer),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=int(os.environ.get("PC_SERVER_WORKERS", "16"))),
                         options=[("grpc.max_send_message_length", 64 << 20),
                                  ("grpc.so_reuseport", 0)])
    faults = faults_handlers()
    talk = {"Chat": faults.pop("Chat")}  # service faults.Talk, declared by the spec
    server.add_generic_rpc_handlers((
        grpc.method_handlers_generic_handler("test.Test", raw_handlers),
        grpc.method_handlers_generic_handler("faults.Faults", faults),
        grpc.method_handlers_generic_handler("faults.Talk", talk),
    ))
    if tls:
        with open(tls[0], "rb") as f:
            cert = f.read()
        with open(tls[1], "rb") as f:
            key = f.read()
        creds = grpc.ssl_server_credentials([(key, cert)])
        port = server.add_secure_port(ADDRESS or "127.0.0.1:%d" % port, creds)
    else:
        port = server.add_insecure_port(ADDRESS or "127.0.0.1:%d" % port)
    LISTENING[0] = port
    server.start()
    announce(port)
    server.wait_for_termination()


# -- faults.Faults: a message service ----------------------------------------

# The port the grpc server listens on (Hedge: the slow backend's).
LISTENING = [0]

PROTOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "protos")


def faults_handlers():
    import subprocess
    import grpc
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    out = subprocess.run(["protoc", "-I", PROTOS, "--descriptor_set_out=/dev/stdout",
                          "grpc/faults.proto"], check=True, capture_output=True).stdout
    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(out).file:
        pool.Add(f)
    factory = message_factory.MessageFactory(pool)
    Request = factory.GetPrototype(pool.FindMessageTypeByName("faults.Request"))
    Reply = factory.GetPrototype(pool.FindMessageTypeByName("faults.Reply"))

    counts = {}
    lock = threading.Lock()

    def count(req):
        """Counts one attempt for req.id; returns the count so far."""
        with lock:
            n = counts.get(req.id, 0) + 1
            if req.id:
                counts[req.id] = n
        return n

    def echo(req, ctx):
        return Reply(text=req.text, attempts=count(req))

    def fail_then_succeed(req, ctx):
        n = count(req)
        if n <= req.failures:
            ctx.abort(grpc.StatusCode[req.code], "failure %d of %d" % (n, req.failures))
        return Reply(text="ok after %d" % (n - 1), attempts=n)

    def sleep(req, ctx):
        end = time.monotonic() + req.seconds
        while time.monotonic() < end and ctx.is_active():
            time.sleep(0.01)
        return Reply(text="slept", attempts=count(req))

    def big(req, ctx):
        return Reply(payload=b"x" * req.size, attempts=count(req))

    def metadata(req, ctx):
        md = [(k, v) for k, v in ctx.invocation_metadata() if k.startswith("x-")]
        ctx.send_initial_metadata([("h-" + k, v) for k, v in md])  # protocall call -v shows
        ctx.set_trailing_metadata([("t-" + k, v) for k, v in md])  # both
        return Reply(metadata=[dict(key=k, value=v if isinstance(v, str) else v.hex())
                               for k, v in md], attempts=count(req))

    def compressed(req, ctx):
        ctx.set_compression(grpc.Compression.Gzip)
        return Reply(text=req.text * 100, attempts=count(req))

    def pushback(req, ctx):
        n = count(req)
        if n <= req.failures:
            ctx.set_trailing_metadata([("grpc-retry-pushback-ms", req.pushback)])
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "busy, retry in %s ms" % req.pushback)
        return Reply(text="ok after %d" % (n - 1), attempts=n)

    def attempts(req, ctx):
        with lock:
            return Reply(attempts=counts.get(req.id, 0), cancelled=cancelled.get(req.id, 0))

    cancelled = {}

    def hedge(req, ctx):
        """Attempt n of req.id (counted on arrival): while n <= failures it
        waits req.seconds (a cancellation meanwhile is counted, see Attempts),
        then fails with req.code if set; other attempts answer at once. A
        req.text names the one port where that holds (several servers: one
        slow backend). The reply's text is the attempt's
        grpc-previous-rpc-attempts header."""
        n = count(req)
        previous = dict(ctx.invocation_metadata()).get("grpc-previous-rpc-attempts", "")
        if n <= req.failures and req.text in ("", str(LISTENING[0])):
            end = time.monotonic() + req.seconds
            while time.monotonic() < end:
                if not ctx.is_active():
                    with lock:
                        cancelled[req.id] = cancelled.get(req.id, 0) + 1
                    return Reply()
                time.sleep(0.01)
            if req.code:
                ctx.abort(grpc.StatusCode[req.code], "attempt %d failed" % n)
        return Reply(text=previous, attempts=n)

    def hedge_stream(req, ctx):
        """Hedge's rules, then req.count replies (index 1, 2, ...)."""
        first = hedge(req, ctx)
        if first.attempts == 0:
            return
        for i in range(req.count):
            yield Reply(text=first.text, attempts=first.attempts, index=i + 1)

    def stream(req, ctx):
        n = count(req)
        if n <= req.failures:
            ctx.abort(grpc.StatusCode[req.code], "failure %d of %d" % (n, req.failures))
        payload = b"x" * req.size
        for i in range(req.count):
            yield Reply(index=i + 1, attempts=n, payload=payload)

    def stream_then_fail(req, ctx):
        n = count(req)
        for i in range(req.count):
            yield Reply(index=i + 1, attempts=n)
        if req.failures == 0 or n <= req.failures:
            ctx.abort(grpc.StatusCode[req.code], "stream failed after %d" % req.count)

    def record(requests, ctx):
        """Client streaming: the texts joined with ",", attempts = how many."""
        texts = [r.text for r in requests]
        return Reply(text=",".join(texts), attempts=len(texts))

    def chat(requests, ctx):
        """Bidirectional: one Reply per Request, text and index = its number."""
        for i, r in enumerate(requests):
            yield Reply(text=r.text, index=i + 1)

    def unary(fn, serializer=Reply.SerializeToString):
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=Request.FromString, response_serializer=serializer)

    def server_stream(fn):
        return grpc.unary_stream_rpc_method_handler(
            fn, request_deserializer=Request.FromString,
            response_serializer=Reply.SerializeToString)

    def undecodable(reply):
        """Reply.payload (field 2) announcing 5 bytes and holding 2."""
        return b"\x12\x05ab"

    return {
        "Echo": unary(echo),
        "FailThenSucceed": unary(fail_then_succeed),
        "Sleep": unary(sleep),
        "Big": unary(big),
        "Metadata": unary(metadata),
        "Compressed": unary(compressed),
        "Pushback": unary(pushback),
        "Undecodable": unary(echo, serializer=undecodable),
        "Attempts": unary(attempts),
        "Hedge": unary(hedge),
        "HedgeStream": server_stream(hedge_stream),
        "Stream": server_stream(stream),
        "StreamThenFail": server_stream(stream_then_fail),
        "Record": grpc.stream_unary_rpc_method_handler(
            record, request_deserializer=Request.FromString,
            response_serializer=Reply.SerializeToString),
        "Chat": grpc.stream_stream_rpc_method_handler(
            chat, request_deserializer=Request.FromString,
            response_serializer=Reply.SerializeToString),
    }


# -- h2: a scripted HTTP/2 peer (python3-h2) ----------------------------------

GRPC_CT = ("content-type", "application/grpc")

# RST_STREAM error codes received from clients, in order (for "Resets").
RESETS = []


def frame(payload, flag=0):
    return bytes([flag]) + len(payload).to_bytes(4, "big") + payload


# Request bodies the RefuseEcho and GoawayEcho methods turned away once.
TURNED_AWAY = set()


def h2_reply(h, sid, method, arg, headers=None):
    """What each method of the scripted peer answers; 'arg' is the request
    message's text, 'headers' the request's header fields."""
    ok200 = [(":status", "200"), GRPC_CT]
    if method in ("RefuseEcho", "GoawayEcho"):
        # the first time a request body is seen: RST_STREAM REFUSED_STREAM
        # (RefuseEcho) or GOAWAY taking no stream (GoawayEcho), both of
        # which a client retries transparently; then the body back with
        # the request's x- metadata as trailers (x-echo-NAME)
        if arg not in TURNED_AWAY:
            TURNED_AWAY.add(arg)
            if method == "RefuseEcho":
                h.reset_stream(sid, error_code=7)
            else:
                h.close_connection(error_code=0, last_stream_id=0)
            return
        echo = [("x-echo-" + k[2:], v) for k, v in (headers or []) if k.startswith("x-")]
        h.send_headers(sid, ok200)
        h.send_data(sid, frame(arg.encode("latin-1")))
        h.send_headers(sid, [("grpc-status", "0")] + echo, end_stream=True)
    elif method.startswith("Http"):  # HttpNNN: that status, no grpc-status
        h.send_headers(sid, [(":status", method[4:]), ("content-type", "text/plain")])
        h.send_data(sid, b"not grpc", end_stream=True)
    elif method == "Zero":
        h.send_headers(sid, ok200)
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    elif method == "Two":
        h.send_headers(sid, ok200)
        h.send_data(sid, frame(b"one") + frame(b"two"))
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    elif method == "TrailersOnly":
        h.send_headers(sid, ok200 + [("grpc-status", "5"), ("grpc-message", "no%20such%20thing"),
                                     ("x-only", "yes")], end_stream=True)
    elif method == "Informational":  # 1xx header blocks before the response
        h.send_headers(sid, [(":status", "100")])
        h.send_headers(sid, [(":status", "103"), ("x-early", "hint")])
        h.send_headers(sid, ok200 + [("x-h", "1")])
        h.send_data(sid, frame(b"ok"))
        h.send_headers(sid, [("grpc-status", "0"), ("x-t", "2")], end_stream=True)
    elif method == "InformationalOnly":  # a 1xx block, then Trailers-Only
        h.send_headers(sid, [(":status", "100")])
        h.send_headers(sid, ok200 + [("grpc-status", "5"), ("grpc-message", "gone"),
                                     ("x-only", "yes")], end_stream=True)
    elif method.startswith("StatusInHeaders"):  # grpc-status in the headers, then DATA
        # StatusInHeadersN: grpc-status N there; ...End: END_STREAM on the
        # DATA (no trailers), else trailers with grpc-status 0
        code = method[len("StatusInHeaders"):].replace("End", "") or "5"
        h.send_headers(sid, ok200 + [("grpc-status", code), ("grpc-message", "in%20headers"),
                                     ("x-h", "1")])
        h.send_data(sid, frame(b"ok"), end_stream=method.endswith("End"))
        if not method.endswith("End"):
            h.send_headers(sid, [("grpc-status", "0"), ("x-t", "2")], end_stream=True)
    elif method == "Pushback":  # arg: the grpc-retry-pushback-ms value
        h.send_headers(sid, ok200)
        h.send_headers(sid, [("grpc-status", "14"), ("grpc-message", "busy"),
                             ("grpc-retry-pushback-ms", arg)], end_stream=True)
    elif method == "BadField":  # a header value with a control character, which HTTP/2 refuses
        h.config.validate_outbound_headers = False
        h.config.normalize_outbound_headers = False
        try:
            h.send_headers(sid, ok200 + [("x-bad", "a\x01b")])
        finally:
            h.config.validate_outbound_headers = True
            h.config.normalize_outbound_headers = True
    elif method == "Rst":  # arg: the RST_STREAM error code
        h.send_headers(sid, ok200)
        h.reset_stream(sid, error_code=int(arg))
    elif method == "CompressedNoEncoding":
        h.send_headers(sid, ok200)
        h.send_data(sid, frame(b"abc", flag=1))
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    elif method == "UnofferedEncoding":
        h.send_headers(sid, ok200 + [("grpc-encoding", "br")])
        h.send_data(sid, frame(b"abc", flag=1))
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    elif method == "Truncated":
        h.send_headers(sid, ok200)
        h.send_data(sid, frame(b"x" * 100)[:20])
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    elif method == "NoStatus":
        h.send_headers(sid, ok200)
        h.send_data(sid, frame(b"hello"), end_stream=True)
    elif method == "BadStatus":
        h.send_headers(sid, ok200)
        h.send_headers(sid, [("grpc-status", "abc")], end_stream=True)
    elif method == "BinMetadata":  # padded in headers, unpadded in trailers, details
        h.send_headers(sid, ok200 + [("x-pad-bin", base64.b64encode(b"\x00\x01\xfe").decode()),
                                     ("x-pad2-bin", base64.b64encode(b"\xff").decode())])
        h.send_data(sid, frame(b"ok"))
        h.send_headers(sid, [("grpc-status", "3"), ("grpc-message", "bad%20arg%ZZ%"),
                             ("x-unpad-bin", base64.b64encode(b"\xff").decode().rstrip("=")),
                             ("grpc-status-details-bin",
                              base64.b64encode(b"\x08\x03\x12\x03bad").decode().rstrip("="))],
                       end_stream=True)
    elif method == "BigHeader":  # one 40 KiB header line
        h.send_headers(sid, ok200 + [("x-big", "y" * 40000)])
        h.send_data(sid, frame(b"ok"))
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    elif method == "Hang":  # headers, then nothing until the client gives up
        h.send_headers(sid, ok200)
    elif method == "Resets":  # the RST_STREAM codes clients sent so far
        h.send_headers(sid, ok200)
        h.send_data(sid, frame(",".join(str(c) for c in RESETS).encode()))
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    elif method == "AnswerThenGoaway":  # a whole answer, then GOAWAY; the socket stays open
        h.send_headers(sid, ok200)
        h.send_data(sid, frame(b"last"))
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
        h.close_connection(error_code=0, last_stream_id=sid)
    elif method == "GoawayFirst":  # graceful GOAWAY naming this stream, then the answer
        # python3-h2 sends nothing after its own GOAWAY: hyperframe (h2's
        # frame layer) builds this one, queued before the answer
        from hyperframe.frame import GoAwayFrame
        goaway = GoAwayFrame(0)
        goaway.last_stream_id = sid
        goaway.error_code = 0
        h._data_to_send += goaway.serialize()
        h.send_headers(sid, ok200)
        h.send_data(sid, frame(b"finished"))
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    elif method == "HugeHeader":  # an 8 MB header value (no Huffman: pure Python is slow)
        encode = h.encoder.encode
        h.encoder.encode = lambda headers, huffman=True: encode(headers, huffman=False)
        h.send_headers(sid, ok200 + [("x-huge", "z" * (8 << 20))])
        h.encoder.encode = encode
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    elif method == "Ok":
        h.send_headers(sid, ok200)
        h.send_data(sid, frame(b"ok"))
        h.send_headers(sid, [("grpc-status", "0")], end_stream=True)
    elif method == "Goaway":
        h.close_connection(error_code=0, last_stream_id=0)
    else:
        h.send_headers(sid, ok200)
        h.send_headers(sid, [("grpc-status", "12"), ("grpc-message", "no method " + method)],
                       end_stream=True)


def h2_connection(conn):
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    import h2.settings

    config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8",
                                       validate_inbound_headers=False)
    h = h2.connection.H2Connection(config=config)
    h.local_settings = h2.settings.Settings(client=False)
    h.initiate_connection()
    conn.sendall(h.data_to_send())
    streams = {}
    lock = threading.Lock()

    def later_goaway(last):
        with lock:
            h.close_connection(error_code=0, last_stream_id=last)
            conn.sendall(h.data_to_send())
        streams["linger"] = True

    try:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            lock.acquire()
            try:
                events = h.receive_data(data)
            except h2.exceptions.ProtocolError:
                lock.release()
                continue
            for ev in events:
                if isinstance(ev, h2.events.RequestReceived):
                    streams[ev.stream_id] = [dict(ev.headers)[":path"], b"", ev.headers]
                    if streams[ev.stream_id][0].endswith("/NoRead"):
                        # headers, then never a WINDOW_UPDATE: the client's
                        # sends must stop at the flow-control window
                        h.send_headers(ev.stream_id, [(":status", "200"), GRPC_CT])
                elif isinstance(ev, h2.events.DataReceived):
                    if streams[ev.stream_id][0].endswith("/NoRead"):
                        continue
                    streams[ev.stream_id][1] += ev.data
                    h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamReset):
                    RESETS.append(ev.error_code)
                    streams.pop(ev.stream_id, None)
                elif isinstance(ev, h2.events.StreamEnded):
                    path, body, fields = streams.pop(ev.stream_id)
                    method = path.rsplit("/", 1)[-1]
                    if method == "GoawayLater":  # answer, then GOAWAY on the idle connection
                        h2_reply(h, ev.stream_id, "Ok", "")
                        threading.Timer(0.1, later_goaway, (ev.stream_id,)).start()
                    else:
                        h2_reply(h, ev.stream_id, method, body[5:].decode("latin-1"), fields)
                    if method == "AnswerThenGoaway":
                        streams["linger"] = True
            out = h.data_to_send()
            if out:
                conn.sendall(out)
            lock.release()
            if h.state_machine.state == h2.connection.ConnectionState.CLOSED:
                if streams.get("linger"):  # AnswerThenGoaway: keep the socket open, idle
                    while conn.recv(65536):
                        pass
                return
    except (OSError, KeyError):
        return
    finally:
        conn.close()


def serve_sockets(port, handle):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(16)
    announce(ls.getsockname()[1])
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def garbage_connection(conn):
    try:
        conn.recv(65536)
        conn.sendall(b"SSH-2.0-OpenSSH_9.2 this is not HTTP/2\r\n" * 8)
        while conn.recv(65536):
            pass
    except OSError:
        pass
    finally:
        conn.close()


def hangup_connection(conn):
    try:
        conn.recv(65536)
    except OSError:
        pass
    finally:
        conn.close()


def connect_noend_connection(conn):
    """A Connect server stream's end-of-stream message (an error whose text
    names an address) without END_STREAM, then the connection closed: the
    client's status is its lost connection, not the message's."""
    import h2.config
    import h2.connection
    import h2.events
    import json
    import struct

    h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    h.initiate_connection()
    try:
        conn.sendall(h.data_to_send())
        while True:
            data = conn.recv(65536)
            if not data:
                return
            for ev in h.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    h.send_headers(ev.stream_id, [(":status", "200"),
                                                  ("content-type", "application/connect+proto")])
                    end = json.dumps({"error": {"code": "unavailable",
                                                "message": "connect to 10.0.0.1:1: refused"}}).encode()
                    h.send_data(ev.stream_id, struct.pack(">BI", 2, len(end)) + end)
                    conn.sendall(h.data_to_send())
                    time.sleep(0.2)
                    return
            conn.sendall(h.data_to_send())
    except OSError:
        pass
    finally:
        conn.close()


def http1_connection(conn):
    try:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    except OSError:
        pass
    finally:
        conn.close()


SILENT = {"file": None, "tls": None, "connections": 0, "bytes": 0, "lock": threading.Lock()}


def silent_count(connections, nbytes):
    with SILENT["lock"]:
        SILENT["connections"] += connections
        SILENT["bytes"] += nbytes
        if SILENT["file"]:
            tmp = SILENT["file"] + ".new"
            with open(tmp, "w") as f:
                f.write("%d %d\n" % (SILENT["connections"], SILENT["bytes"]))
            os.replace(tmp, SILENT["file"])


def silent_connection(conn):
    try:
        silent_count(1, 0)
        if SILENT["tls"]:
            conn = SILENT["tls"].wrap_socket(conn, server_side=True)
        while True:
            data = conn.recv(65536)
            if not data:
                break
            silent_count(0, len(data))
    except OSError:
        pass
    finally:
        conn.close()


def late_connection(conn, seconds, upstream):
    def pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    time.sleep(seconds)
    try:
        up = socket.create_connection(("127.0.0.1", upstream))
    except OSError:
        conn.close()
        return
    threading.Thread(target=pipe, args=(up, conn), daemon=True).start()
    pipe(conn, up)


def bench_client(port, size, seconds, path=None):
    import grpc

    channel = grpc.insecure_channel("127.0.0.1:%d" % port)
    if path is None:
        echo = channel.unary_unary("/test.Test/Echo")
        request = b"x" * size
    else:
        echo = channel.unary_unary(path)
        length, n = b"", size
        while True:  # field 1 (length-delimited): tag, varint length, bytes
            length += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                break
        request = b"\x0a" + length + b"x" * size
    for _ in range(100):  # warm up: connection, first calls
        echo(request)
    n, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        echo(request)
        n += 1
    sys.stdout.write("%.1f\n" % (n / (time.monotonic() - start)))
    channel.close()


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "client":
        bench_client(port, int(sys.argv[3]), float(sys.argv[4]),
                     sys.argv[5] if len(sys.argv) > 5 else None)
        return
    threading.Thread(target=watch_stdin, daemon=True).start()
    threading.Thread(target=lifetime, daemon=True).start()
    if mode == "grpc":
        serve_grpc(port)
    elif mode == "tls":
        serve_grpc(port, tls=(sys.argv[3], sys.argv[4]))
    elif mode == "h2":
        serve_sockets(port, h2_connection)
    elif mode == "garbage":
        serve_sockets(port, garbage_connection)
    elif mode == "hangup":
        serve_sockets(port, hangup_connection)
    elif mode == "http1":
        serve_sockets(port, http1_connection)
    elif mode == "connect_noend":
        serve_sockets(port, connect_noend_connection)
    elif mode == "silent":
        if len(sys.argv) > 3:
            SILENT["file"] = sys.argv[3]
        if len(sys.argv) > 5:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(sys.argv[4], sys.argv[5])
            ctx.set_alpn_protocols(["h2"])
            SILENT["tls"] = ctx
        serve_sockets(port, silent_connection)
    elif mode == "late":
        seconds, upstream = float(sys.argv[3]), int(sys.argv[4])
        serve_sockets(port, lambda conn: late_connection(conn, seconds, upstream))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
