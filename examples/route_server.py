"""A real gRPC server for examples/quickstart.lua --target, in Python.

    /usr/bin/python3 examples/route_server.py [PORT]

Serves demo.Router from examples/route.proto with Debian's python3-grpcio and
python3-protobuf (no generated code: protoc compiles the schema to a
descriptor set at start-up). Measure fails twice with UNAVAILABLE for each
route name, then answers, so the client's retry policy shows. PORT 0 picks
a free one. Prints the address it listens on and serves until a signal
stops it (Ctrl-C, SIGTERM), started with `&` as well as in a terminal: it
never reads its standard input.
"""
import math
import os
import signal
import subprocess
import sys
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

HERE = os.path.dirname(os.path.abspath(__file__))


def load_types():
    out = subprocess.run(
        ["protoc", "-I", HERE, "--descriptor_set_out=/dev/stdout", "route.proto"],
        check=True, capture_output=True).stdout
    fds = descriptor_pb2.FileDescriptorSet.FromString(out)
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    factory = message_factory.MessageFactory(pool)
    return {n: factory.GetPrototype(pool.FindMessageTypeByName("demo." + n))
            for n in ("Point", "Route", "Distance")}


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 50051
    types = load_types()
    Route, Distance, Point = types["Route"], types["Distance"], types["Point"]
    failures = {}

    def measure(route, context):
        n = failures.get(route.name, 0)
        if n < 2:
            failures[route.name] = n + 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "flaky server")
        pts = route.points
        length = sum(math.hypot(pts[i].x - pts[i - 1].x, pts[i].y - pts[i - 1].y)
                     for i in range(1, len(pts)))
        return Distance(length=length, legs=max(len(pts) - 1, 0))

    def walk(route, context):
        for p in route.points:
            yield p

    def record(points, context):
        pts = list(points)
        length = sum(math.hypot(pts[i].x - pts[i - 1].x, pts[i].y - pts[i - 1].y)
                     for i in range(1, len(pts)))
        return Distance(length=length, legs=max(len(pts) - 1, 0))

    def follow(points, context):
        prev = None
        for p in points:
            if prev is not None:
                yield Point(x=p.x - prev.x, y=p.y - prev.y)
            prev = p

    handler = grpc.method_handlers_generic_handler("demo.Router", {
        "Measure": grpc.unary_unary_rpc_method_handler(
            measure, request_deserializer=Route.FromString,
            response_serializer=Distance.SerializeToString),
        "Walk": grpc.unary_stream_rpc_method_handler(
            walk, request_deserializer=Route.FromString,
            response_serializer=Point.SerializeToString),
        "Record": grpc.stream_unary_rpc_method_handler(
            record, request_deserializer=Point.FromString,
            response_serializer=Distance.SerializeToString),
        "Follow": grpc.stream_stream_rpc_method_handler(
            follow, request_deserializer=Point.FromString,
            response_serializer=Point.SerializeToString),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("demo.Router listening on http://127.0.0.1:%d" % port, flush=True)

    # SIGTERM stops it as Ctrl-C does: calls in flight get a second.
    signal.signal(signal.SIGTERM, lambda *_: server.stop(1))
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        server.stop(1).wait()


if __name__ == "__main__":
    main()
