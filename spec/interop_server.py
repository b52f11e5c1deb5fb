"""grpc.testing.TestService for spec/interop_spec.lua: gRPC's interop test
server (doc/interop-test-descriptions.md, "Server") on Debian's python3-grpcio,
run with /usr/bin/python3.

    interop_server.py PORT [CERT KEY [CLIENT_CA]]

    interop_server.py PORT --identity-only ...   the same, refusing compressed requests

PORT 0 picks a free loopback port; with CERT and KEY (PEM files) it serves
TLS, and with CLIENT_CA too it requires a client certificate signed by that
CA (mutual TLS). The first line printed is "PORT PID"; the server exits when
its standard input reaches end of file, and after PC_SERVER_LIFETIME seconds
(120 unless set) in any case.

The messages come from spec/fixtures/protos/grpc/testing/*.proto, compiled
by protoc at start-up into a descriptor set, classes from python3-protobuf's
message_factory; the handlers are generic (no generated code).

python3-grpcio does not tell a handler whether a request was compressed, so
`expect_compressed` is not checked; the --identity-only server (its
grpc.compression_enabled_algorithms_bitset holds identity alone) answers a
gzip request UNIMPLEMENTED instead, which is how the spec sees that a request
went compressed.

Beyond the interop server's behaviour: a UnaryCall asking for a
response_status and sending metadata "x-rich-details: 1" gets a
grpc-status-details-bin trailer, a google.rpc.Status with a
google.rpc.RetryInfo (retry_delay 1.5 s), a google.rpc.ErrorInfo (reason
"R", domain "example.com") and an Any of a type the client does not know
(type.googleapis.com/example.Unknown, value b"\\x08\\x01"); these types
are defined here from descriptors written by hand, independently of
protocall's built-in google/rpc files.
"""
import os
import subprocess
import sys
import threading
import time

from concurrent import futures

import grpc
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, duration_pb2, message_factory

PROTOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "protos")


def watch_stdin():
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


def lifetime():
    time.sleep(float(os.environ.get("PC_SERVER_LIFETIME", "120")))
    os._exit(0)


def load_classes():
    out = subprocess.run(["protoc", "-I", PROTOS, "--include_imports",
                          "--descriptor_set_out=/dev/stdout", "grpc/testing/test.proto"],
                         check=True, capture_output=True).stdout
    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(out).file:
        pool.Add(f)
    # google.rpc.Status, RetryInfo and ErrorInfo, field numbers of googleapis'
    # google/rpc/status.proto and error_details.proto.
    pool.AddSerializedFile(any_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(duration_pb2.DESCRIPTOR.serialized_pb)
    F = descriptor_pb2.FieldDescriptorProto
    rpc = descriptor_pb2.FileDescriptorProto(
        name="rpc_for_interop.proto", package="google.rpc", syntax="proto3",
        dependency=["google/protobuf/any.proto", "google/protobuf/duration.proto"])
    st = rpc.message_type.add(name="Status")
    st.field.add(name="code", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    st.field.add(name="message", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    st.field.add(name="details", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                 type_name=".google.protobuf.Any")
    ri = rpc.message_type.add(name="RetryInfo")
    ri.field.add(name="retry_delay", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                 type_name=".google.protobuf.Duration")
    ei = rpc.message_type.add(name="ErrorInfo")
    ei.field.add(name="reason", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    ei.field.add(name="domain", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool.Add(rpc)
    factory = message_factory.MessageFactory(pool)
    return lambda name: factory.GetPrototype(pool.FindMessageTypeByName(name))


def serve(port, tls, identity_only):
    cls = load_classes()
    Empty = cls("grpc.testing.Empty")
    SimpleRequest = cls("grpc.testing.SimpleRequest")
    SimpleResponse = cls("grpc.testing.SimpleResponse")
    Payload = cls("grpc.testing.Payload")
    InReq = cls("grpc.testing.StreamingInputCallRequest")
    InResp = cls("grpc.testing.StreamingInputCallResponse")
    OutReq = cls("grpc.testing.StreamingOutputCallRequest")
    OutResp = cls("grpc.testing.StreamingOutputCallResponse")
    Status = cls("google.rpc.Status")
    RetryInfo = cls("google.rpc.RetryInfo")
    ErrorInfo = cls("google.rpc.ErrorInfo")
    Duration = cls("google.protobuf.Duration")

    def echo_metadata(ctx):
        """x-grpc-test-echo-initial back as a header, x-grpc-test-echo-trailing-bin
        as a trailer, as the interop server does."""
        md = dict(ctx.invocation_metadata())
        if "x-grpc-test-echo-initial" in md:
            ctx.send_initial_metadata([("x-grpc-test-echo-initial",
                                        md["x-grpc-test-echo-initial"])])
        trailing = []
        if "x-grpc-test-echo-trailing-bin" in md:
            trailing.append(("x-grpc-test-echo-trailing-bin", md["x-grpc-test-echo-trailing-bin"]))
        return md, trailing

    def answer_status(ctx, status, md, trailing):
        if status.code == 0:
            return
        if md.get("x-rich-details") == "1":
            rich = Status(code=status.code, message=status.message)
            rich.details.add().Pack(RetryInfo(retry_delay=Duration(seconds=1, nanos=500000000)))
            rich.details.add().Pack(ErrorInfo(reason="R", domain="example.com"))
            rich.details.add(type_url="type.googleapis.com/example.Unknown", value=b"\x08\x01")
            trailing.append(("grpc-status-details-bin", rich.SerializeToString()))
        ctx.set_trailing_metadata(trailing)
        ctx.abort(next(c for c in grpc.StatusCode if c.value[0] == status.code), status.message)

    def empty_call(req, ctx):
        echo_metadata(ctx)
        return Empty()

    def unary_call(req, ctx):
        md, trailing = echo_metadata(ctx)
        if req.HasField("response_status"):
            answer_status(ctx, req.response_status, md, trailing)
        if req.response_compressed.value:
            ctx.set_compression(grpc.Compression.Gzip)
        ctx.set_trailing_metadata(trailing)
        return SimpleResponse(payload=Payload(body=b"\0" * req.response_size))

    def streaming_output_call(req, ctx):
        md, trailing = echo_metadata(ctx)
        for p in req.response_parameters:
            if p.interval_us:
                time.sleep(p.interval_us / 1e6)
            if p.compressed.value:
                ctx.set_compression(grpc.Compression.Gzip)
            yield OutResp(payload=Payload(body=b"\0" * p.size))
        if req.HasField("response_status"):
            answer_status(ctx, req.response_status, md, trailing)
        ctx.set_trailing_metadata(trailing)

    def streaming_input_call(reqs, ctx):
        total = 0
        for r in reqs:
            total += len(r.payload.body)
        return InResp(aggregated_payload_size=total)

    def full_duplex_call(reqs, ctx):
        md, trailing = echo_metadata(ctx)
        for r in reqs:
            if r.HasField("response_status"):
                answer_status(ctx, r.response_status, md, trailing)
            for p in r.response_parameters:
                if p.interval_us:
                    time.sleep(p.interval_us / 1e6)
                yield OutResp(payload=Payload(body=b"\0" * p.size))
        ctx.set_trailing_metadata(trailing)

    def h(kind, fn, req, resp):
        return kind(fn, request_deserializer=req.FromString,
                    response_serializer=resp.SerializeToString)

    handlers = {
        "EmptyCall": h(grpc.unary_unary_rpc_method_handler, empty_call, Empty, Empty),
        "UnaryCall": h(grpc.unary_unary_rpc_method_handler, unary_call, SimpleRequest, SimpleResponse),
        "StreamingOutputCall": h(grpc.unary_stream_rpc_method_handler, streaming_output_call,
                                 OutReq, OutResp),
        "StreamingInputCall": h(grpc.stream_unary_rpc_method_handler, streaming_input_call,
                                InReq, InResp),
        "FullDuplexCall": h(grpc.stream_stream_rpc_method_handler, full_duplex_call,
                            OutReq, OutResp),
    }
    # keepalive PINGs as often as the client likes (spec/connection_spec.lua)
    options = [("grpc.so_reuseport", 0), ("grpc.http2.min_ping_interval_without_data_ms", 10),
               ("grpc.http2.max_ping_strikes", 0)]
    if identity_only:
        options.append(("grpc.compression_enabled_algorithms_bitset", 1))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=options)
    server.add_generic_rpc_handlers((
        grpc.method_handlers_generic_handler("grpc.testing.TestService", handlers),))
    if tls:
        with open(tls[0], "rb") as f:
            cert = f.read()
        with open(tls[1], "rb") as f:
            key = f.read()
        if len(tls) > 2:
            with open(tls[2], "rb") as f:
                ca = f.read()
            creds = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                                require_client_auth=True)
        else:
            creds = grpc.ssl_server_credentials([(key, cert)])
        port = server.add_secure_port("127.0.0.1:%d" % port, creds)
    else:
        port = server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    sys.stdout.write("%d %d\n" % (port, os.getpid()))
    sys.stdout.flush()
    server.wait_for_termination()


def main():
    threading.Thread(target=watch_stdin, daemon=True).start()
    threading.Thread(target=lifetime, daemon=True).start()
    args = sys.argv[1:]
    identity_only = "--identity-only" in args
    args = [a for a in args if a != "--identity-only"]
    serve(int(args[0]), args[1:] or None, identity_only)


if __name__ == "__main__":
    main()
