"""The gRPC upstream of spec/nginx_gateway_spec.lua, run with Debian's
/usr/bin/python3 (python3-grpcio): serves gw.Library
(spec/fixtures/protos/gateway/library.proto, compiled by protoc at start-up
with protocall's google/api files from core/schema/protos; messages from
python3-protobuf's message_factory, no generated code).

    gateway_upstream.py PORT     PORT 0 picks a free loopback port

The first line printed is "PORT PID". It exits when its standard input
reaches end of file, and after PC_SERVER_LIFETIME seconds (120 unless set).
Every call but Calls is counted: Calls answers how many were served, so a
spec can see that a refused request never reached it.
"""
import os
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    port = int(sys.argv[1])
    out = subprocess.run(["protoc", "-I", os.path.join(ROOT, "spec/fixtures/protos"),
                          "-I", os.path.join(ROOT, "core/schema/protos"), "--include_imports",
                          "--descriptor_set_out=/dev/stdout", "gateway/library.proto"],
                         check=True, capture_output=True).stdout
    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(out).file:
        pool.Add(f)
    factory = message_factory.MessageFactory(pool)

    def T(name):
        return factory.GetPrototype(pool.FindMessageTypeByName("gw." + name))

    Book, CallsReply, EchoReply = T("Book"), T("CallsReply"), T("EchoReply")
    HeadersReply, Detail, RpcStatus = T("HeadersReply"), T("Detail"), T("RpcStatus")
    Any = factory.GetPrototype(pool.FindMessageTypeByName("google.protobuf.Any"))
    lock = threading.Lock()
    calls = [0]

    def counted(fn):
        def run(req, ctx):
            with lock:
                calls[0] += 1
            return fn(req, ctx)
        return run

    def get_book(req, ctx):
        return Book(name=req.name, title="title of " + req.name + (" (" + req.view + ")" if req.view else ""),
                    pages=req.pages, tags=list(req.tags), kind=req.kind)

    def create_book(req, ctx):
        b = Book()
        b.CopyFrom(req.book)
        b.name = req.parent + "/books/" + (req.request_id or "new")
        return b

    def update_book(req, ctx):
        return req

    def list_books(req, ctx):
        for i in range(req.count):
            yield Book(name="%s/books/%d" % (req.parent, i + 1), pages=i + 1)
            time.sleep(0.01)
        if req.fail:
            ctx.abort(grpc.StatusCode[req.fail], "stream failed after %d" % req.count)

    def create_books(requests, ctx):
        n = 0
        for _ in requests:
            n += 1
        return CallsReply(calls=n)

    def fail(req, ctx):
        code = grpc.StatusCode[req.code]
        message = req.message or "failed with " + req.code
        if req.reason:
            detail = Any(type_url="type.googleapis.com/gw.Detail",
                         value=Detail(reason=req.reason, domain="gw.example").SerializeToString())
            st = RpcStatus(code=code.value[0], message=message, details=[detail])
            ctx.set_trailing_metadata([("grpc-status-details-bin", st.SerializeToString()),
                                       ("x-failed", req.code)])
        ctx.abort(code, message)

    def headers(req, ctx):
        md = {}
        for k, v in ctx.invocation_metadata():
            if k.startswith("x-") or k == "authorization":
                md[k] = v if isinstance(v, str) else v.hex()
        ctx.send_initial_metadata([("x-answer", "yes")])
        ctx.set_trailing_metadata([("x-done", "1")])
        return HeadersReply(metadata=md)

    def echo(req, ctx):
        with lock:
            n = calls[0]
        return EchoReply(text=req.text, calls=n)

    def calls_served(req, ctx):
        with lock:
            return CallsReply(calls=calls[0])

    def handler(fn, req, shape="unary", out=None):
        Req = T(req)
        ser = (out or Book).SerializeToString
        make = {"unary": grpc.unary_unary_rpc_method_handler, "server": grpc.unary_stream_rpc_method_handler,
                "client": grpc.stream_unary_rpc_method_handler}[shape]
        return make(fn, request_deserializer=Req.FromString, response_serializer=ser)

    handlers = {
        "GetBook": handler(counted(get_book), "GetBookRequest"),
        "CreateBook": handler(counted(create_book), "CreateBookRequest"),
        "UpdateBook": handler(counted(update_book), "Book"),
        "ListBooks": handler(counted(list_books), "ListBooksRequest", "server"),
        "CreateBooks": handler(counted(create_books), "Book", "client", CallsReply),
        "Fail": handler(counted(fail), "FailRequest"),
        "Headers": handler(counted(headers), "HeadersRequest", out=HeadersReply),
        "Calls": handler(calls_served, "CallsRequest", out=CallsReply),
        "Echo": handler(counted(echo), "EchoRequest", out=EchoReply),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("gw.Library", handlers)])
    port = server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    sys.stdout.write("%d %d\n" % (port, os.getpid()))
    sys.stdout.flush()

    def lifetime():
        time.sleep(float(os.environ.get("PC_SERVER_LIFETIME", "120")))
        os._exit(0)
    threading.Thread(target=lifetime, daemon=True).start()
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
