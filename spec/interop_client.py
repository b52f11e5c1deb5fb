"""gRPC's interop test client cases (doc/interop-test-descriptions.md,
"Client") written with Debian's python3-grpcio, for
spec/interop_server_spec.lua: runs every case against a
grpc.testing.TestService and prints one line per case, "NAME ok" or
"NAME FAIL what went wrong", then "done".

    /usr/bin/python3 spec/interop_client.py PORT [CA_FILE]

With CA_FILE the channel is TLS (the server's certificate for localhost,
signed by that CA), h2c otherwise. The messages come from
spec/fixtures/protos/grpc/testing/*.proto, compiled by protoc at start-up
(python3-protobuf's message_factory; no generated code).

Where python3-grpcio cannot do what a description asks, the case does the
nearest thing and says so here:
- server_compressed_unary / server_compressed_streaming: grpcio does not
  show a response's compressed flag, so these check only that the
  responses arrive whole; spec/interop_server_spec.lua reads the flags
  with a raw HTTP/2 client (spec/h2_client.py, mode "flags").
- client_compressed_streaming: grpcio compresses every message of a call
  or none, so the compressed call sends both messages compressed with
  expect_compressed true (27182 + 45904 bytes: 73086 still), and the
  probe is a call whose uncompressed message expects compression.
"""
import os
import queue
import subprocess
import sys

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "protos")
TIMEOUT = 20


def load_classes():
    out = subprocess.run(["protoc", "-I", PROTOS, "--include_imports",
                          "--descriptor_set_out=/dev/stdout", "grpc/testing/test.proto"],
                         check=True, capture_output=True).stdout
    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(out).file:
        pool.Add(f)
    factory = message_factory.MessageFactory(pool)
    return lambda name: factory.GetPrototype(pool.FindMessageTypeByName("grpc.testing." + name))


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def zeros(n):
    return b"\0" * n


class Requests:
    """A request stream the case feeds one message at a time (ping_pong)."""

    def __init__(self):
        self.q = queue.Queue()

    def send(self, m):
        self.q.put(m)

    def close(self):
        self.q.put(None)

    def __iter__(self):
        return self

    def __next__(self):
        m = self.q.get()
        if m is None:
            raise StopIteration
        return m


def expect_error(code, fn, message=None):
    try:
        fn()
    except grpc.RpcError as e:
        check(e.code() == code, "expected %s, got %s: %s" % (code.name, e.code().name, e.details()))
        if message is not None:
            check(e.details() == message, "message %r, expected %r" % (e.details(), message))
        return
    raise Failed("expected %s, the call succeeded" % code.name)


def cases(ch, M):
    def method(kind, path, req, resp):
        return getattr(ch, kind)("/grpc.testing." + path, request_serializer=req.SerializeToString,
                                 response_deserializer=resp.FromString)

    Empty, SimpleRequest, SimpleResponse = M("Empty"), M("SimpleRequest"), M("SimpleResponse")
    InReq, InResp = M("StreamingInputCallRequest"), M("StreamingInputCallResponse")
    OutReq, OutResp = M("StreamingOutputCallRequest"), M("StreamingOutputCallResponse")
    Payload, Params, BoolValue, EchoStatus = (M("Payload"), M("ResponseParameters"), M("BoolValue"),
                                              M("EchoStatus"))
    empty = method("unary_unary", "TestService/EmptyCall", Empty, Empty)
    unary = method("unary_unary", "TestService/UnaryCall", SimpleRequest, SimpleResponse)
    out_stream = method("unary_stream", "TestService/StreamingOutputCall", OutReq, OutResp)
    in_stream = method("stream_unary", "TestService/StreamingInputCall", InReq, InResp)
    duplex = method("stream_stream", "TestService/FullDuplexCall", OutReq, OutResp)
    unimplemented = method("unary_unary", "TestService/UnimplementedCall", Empty, Empty)
    unimplemented_service = method("unary_unary", "UnimplementedService/UnimplementedCall", Empty,
                                   Empty)

    def large_request(**kw):
        return SimpleRequest(response_size=314159, payload=Payload(body=zeros(271828)), **kw)

    def check_large(r):
        check(r.payload.body == zeros(314159), "payload of %d bytes, not 314159 zeros"
              % len(r.payload.body))

    def empty_unary():
        r = empty(Empty(), timeout=TIMEOUT)
        check(r is not None and r.ByteSize() == 0, "not an empty response")

    def large_unary():
        check_large(unary(large_request(), timeout=TIMEOUT))

    def client_streaming():
        reqs = [InReq(payload=Payload(body=zeros(n))) for n in (27182, 8, 1828, 45904)]
        r = in_stream(iter(reqs), timeout=TIMEOUT)
        check(r.aggregated_payload_size == 74922, "aggregated %d" % r.aggregated_payload_size)

    def server_streaming():
        sizes = (31415, 9, 2653, 58979)
        req = OutReq(response_parameters=[Params(size=n) for n in sizes])
        got = [len(r.payload.body) for r in out_stream(req, timeout=TIMEOUT)]
        check(tuple(got) == sizes, "sizes %s" % got)

    def ping_pong():
        reqs = Requests()
        call = duplex(reqs, timeout=TIMEOUT)
        for req, resp in ((27182, 31415), (8, 9), (1828, 2653), (45904, 58979)):
            reqs.send(OutReq(response_parameters=[Params(size=resp)], payload=Payload(body=zeros(req))))
            r = next(call)
            check(r.payload.body == zeros(resp), "response of %d bytes, expected %d"
                  % (len(r.payload.body), resp))
        reqs.close()
        rest = list(call)
        check(rest == [], "%d responses after the half-close" % len(rest))
        check(call.code() == grpc.StatusCode.OK, "status %s" % call.code())

    def empty_stream():
        got = list(duplex(iter([]), timeout=TIMEOUT))
        check(got == [], "%d responses" % len(got))

    def cancel_after_begin():
        reqs = Requests()
        fut = in_stream.future(reqs, timeout=TIMEOUT)
        fut.cancel()
        check(fut.cancelled(), "not cancelled")
        check(fut.code() == grpc.StatusCode.CANCELLED, "status %s" % fut.code())
        reqs.close()

    def cancel_after_first_response():
        reqs = Requests()
        call = duplex(reqs, timeout=TIMEOUT)
        reqs.send(OutReq(response_parameters=[Params(size=31415)], payload=Payload(body=zeros(27182))))
        r = next(call)
        check(len(r.payload.body) == 31415, "first response of %d bytes" % len(r.payload.body))
        call.cancel()
        check(call.code() == grpc.StatusCode.CANCELLED, "status %s" % call.code())
        reqs.close()

    def timeout_on_sleeping_server():
        reqs = Requests()
        reqs.send(OutReq(payload=Payload(body=zeros(27182))))
        call = duplex(reqs, timeout=0.001)
        expect_error(grpc.StatusCode.DEADLINE_EXCEEDED, lambda: list(call))
        reqs.close()

    echo_md = (("x-grpc-test-echo-initial", "test_initial_metadata_value"),
               ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab"))

    def check_echo(call):
        initial = dict(call.initial_metadata())
        trailing = dict(call.trailing_metadata())
        check(initial.get("x-grpc-test-echo-initial") == "test_initial_metadata_value",
              "initial metadata %s" % initial)
        check(trailing.get("x-grpc-test-echo-trailing-bin") == b"\xab\xab\xab",
              "trailing metadata %s" % trailing)

    def custom_metadata():
        r, call = unary.with_call(large_request(), metadata=echo_md, timeout=TIMEOUT)
        check_large(r)
        check_echo(call)
        reqs = Requests()
        call = duplex(reqs, metadata=echo_md, timeout=TIMEOUT)
        reqs.send(OutReq(response_parameters=[Params(size=314159)], payload=Payload(body=zeros(271828))))
        reqs.close()
        got = [len(r.payload.body) for r in call]
        check(got == [314159], "responses %s" % got)
        check_echo(call)

    def status_code_and_message():
        st = EchoStatus(code=2, message="test status message")
        expect_error(grpc.StatusCode.UNKNOWN, lambda: unary(SimpleRequest(response_status=st),
                                                            timeout=TIMEOUT), st.message)
        expect_error(grpc.StatusCode.UNKNOWN,
                     lambda: list(duplex(iter([OutReq(response_status=st)]), timeout=TIMEOUT)),
                     st.message)

    def special_status_message():
        text = "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n"
        st = EchoStatus(code=2, message=text)
        expect_error(grpc.StatusCode.UNKNOWN, lambda: unary(SimpleRequest(response_status=st),
                                                            timeout=TIMEOUT), text)

    def unimplemented_method():
        expect_error(grpc.StatusCode.UNIMPLEMENTED, lambda: unimplemented(Empty(), timeout=TIMEOUT))

    def unimplemented_service_():
        expect_error(grpc.StatusCode.UNIMPLEMENTED,
                     lambda: unimplemented_service(Empty(), timeout=TIMEOUT))

    gzip = grpc.Compression.Gzip

    def client_compressed_unary():
        expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: unary(large_request(expect_compressed=BoolValue(value=True)),
                                   timeout=TIMEOUT))
        check_large(unary(large_request(expect_compressed=BoolValue(value=True)), compression=gzip,
                          timeout=TIMEOUT))
        check_large(unary(large_request(expect_compressed=BoolValue(value=False)), timeout=TIMEOUT))

    def client_compressed_streaming():
        probe = InReq(payload=Payload(body=zeros(27182)), expect_compressed=BoolValue(value=True))
        expect_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: in_stream(iter([probe]), timeout=TIMEOUT))
        reqs = [InReq(payload=Payload(body=zeros(27182)), expect_compressed=BoolValue(value=True)),
                InReq(payload=Payload(body=zeros(45904)), expect_compressed=BoolValue(value=True))]
        r = in_stream(iter(reqs), compression=gzip, timeout=TIMEOUT)
        check(r.aggregated_payload_size == 73086, "aggregated %d" % r.aggregated_payload_size)
        plain = [InReq(payload=Payload(body=zeros(45904)), expect_compressed=BoolValue(value=False))]
        r = in_stream(iter(plain), timeout=TIMEOUT)
        check(r.aggregated_payload_size == 45904, "aggregated %d" % r.aggregated_payload_size)

    def server_compressed_unary():
        for on in (True, False):
            check_large(unary(large_request(response_compressed=BoolValue(value=on)), timeout=TIMEOUT))

    def server_compressed_streaming():
        req = OutReq(response_parameters=[Params(size=31415, compressed=BoolValue(value=True)),
                                          Params(size=92653, compressed=BoolValue(value=False))])
        got = [r.payload.body for r in out_stream(req, timeout=TIMEOUT)]
        check(got == [zeros(31415), zeros(92653)], "sizes %s" % [len(b) for b in got])

    return [("empty_unary", empty_unary), ("large_unary", large_unary),
            ("client_streaming", client_streaming), ("server_streaming", server_streaming),
            ("ping_pong", ping_pong), ("empty_stream", empty_stream),
            ("cancel_after_begin", cancel_after_begin),
            ("cancel_after_first_response", cancel_after_first_response),
            ("timeout_on_sleeping_server", timeout_on_sleeping_server),
            ("custom_metadata", custom_metadata), ("status_code_and_message", status_code_and_message),
            ("special_status_message", special_status_message),
            ("unimplemented_method", unimplemented_method),
            ("unimplemented_service", unimplemented_service_),
            ("client_compressed_unary", client_compressed_unary),
            ("server_compressed_unary", server_compressed_unary),
            ("client_compressed_streaming", client_compressed_streaming),
            ("server_compressed_streaming", server_compressed_streaming)]


def main():
    port = sys.argv[1]
    if len(sys.argv) > 2:
        with open(sys.argv[2], "rb") as f:
            creds = grpc.ssl_channel_credentials(f.read())
        ch = grpc.secure_channel("localhost:" + port, creds)
    else:
        ch = grpc.insecure_channel("127.0.0.1:" + port)
    for name, fn in cases(ch, load_classes()):
        try:
            fn()
            print(name, "ok", flush=True)
        except Exception as e:  # one line per case, whatever went wrong
            print(name, "FAIL", type(e).__name__, str(e).replace("\n", " "), flush=True)
    ch.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
