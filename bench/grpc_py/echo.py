"""The benchmark's echo service (bench/grpc_cpp/echo.proto) with Debian's
python3-grpcio, run with /usr/bin/python3 by bench/service_bench.lua and
bench/server_bench.lua. Messages are python3-protobuf classes made from
protoc's descriptor of echo.proto at start-up (no generated code).

    echo.py server PORT
        serves bench.Echo on 127.0.0.1:PORT (0: a free port) with a pool of
        16 threads; prints "PORT PID", exits when its standard input reaches
        end of file (and after 600 s in any case).
    echo.py client PORT unary SIZE SECONDS [INFLIGHT]
        bench.Echo/Echo with SIZE bytes for SECONDS after 100 warm-up calls;
        INFLIGHT (default 1) > 1 keeps that many calls outstanding with the
        futures API (Echo.future: the oldest is waited for, then a new one
        starts);
    echo.py client PORT stream|collect|chat SIZE COUNT
        Stream: COUNT replies read; Collect: COUNT messages sent (from a
        generator); Chat: COUNT messages sent from a generator while the
        replies are read.

A client prints "RATE TOTAL CPU" as bench/grpc_cpp/echo_client.cc does: per
second over the measured part; the calls (or messages) plus the 100 warm-up
calls; the process's CPU seconds (time.process_time: every thread, grpc's
own included) per 10,000 calls (or messages) of the measured part.
"""
import collections
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = os.path.join(HERE, "..", "grpc_cpp")


def messages():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    out = subprocess.run(["protoc", "-I", PROTOS, "--descriptor_set_out=/dev/stdout",
                          "echo.proto"], check=True, capture_output=True).stdout
    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(out).file:
        pool.Add(f)
    factory = message_factory.MessageFactory(pool)
    return [factory.GetPrototype(pool.FindMessageTypeByName("bench." + name))
            for name in ("Msg", "StreamRequest", "Count")]


def serve(port):
    from concurrent import futures
    import grpc

    Msg, StreamRequest, Count = messages()

    def echo(request, ctx):
        return request

    def stream(request, ctx):
        m = Msg(data=b"x" * request.size)
        for _ in range(request.count):
            yield m

    def collect(requests, ctx):
        n = 0
        for _ in requests:
            n += 1
        return Count(messages=n)

    def chat(requests, ctx):
        for r in requests:
            yield r

    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(
            echo, request_deserializer=Msg.FromString, response_serializer=Msg.SerializeToString),
        "Stream": grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=StreamRequest.FromString,
            response_serializer=Msg.SerializeToString),
        "Collect": grpc.stream_unary_rpc_method_handler(
            collect, request_deserializer=Msg.FromString,
            response_serializer=Count.SerializeToString),
        "Chat": grpc.stream_stream_rpc_method_handler(
            chat, request_deserializer=Msg.FromString, response_serializer=Msg.SerializeToString),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", handlers),))
    port = server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    sys.stdout.write("%d %d\n" % (port, os.getpid()))
    sys.stdout.flush()

    def watch_stdin():
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    def lifetime():
        time.sleep(600)
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    threading.Thread(target=lifetime, daemon=True).start()
    server.wait_for_termination()


def client(port, mode, size, amount, inflight):
    import grpc

    Msg, StreamRequest, Count = messages()
    channel = grpc.insecure_channel("127.0.0.1:%d" % port)
    path = "/bench.Echo/"
    echo = channel.unary_unary(path + "Echo", request_serializer=Msg.SerializeToString,
                               response_deserializer=Msg.FromString)
    request = Msg(data=b"x" * size)
    warm = 100
    for _ in range(warm):  # the connection, the first calls
        echo(request)
    n, start, cpu0 = 0, time.monotonic(), time.process_time()
    if mode == "unary" and inflight <= 1:
        while time.monotonic() - start < amount:
            echo(request)
            n += 1
    elif mode == "unary":
        outstanding = collections.deque(echo.future(request) for _ in range(inflight))
        while outstanding:
            outstanding.popleft().result()
            n += 1
            if time.monotonic() - start < amount:
                outstanding.append(echo.future(request))
    elif mode == "stream":
        call = channel.unary_stream(path + "Stream", request_serializer=StreamRequest.SerializeToString,
                                    response_deserializer=Msg.FromString)
        for _ in call(StreamRequest(count=int(amount), size=size)):
            n += 1
    elif mode == "collect":
        call = channel.stream_unary(path + "Collect", request_serializer=Msg.SerializeToString,
                                    response_deserializer=Count.FromString)
        n = call(request for _ in range(int(amount))).messages
    elif mode == "chat":
        call = channel.stream_stream(path + "Chat", request_serializer=Msg.SerializeToString,
                                     response_deserializer=Msg.FromString)
        for _ in call(request for _ in range(int(amount))):
            n += 1
    else:
        sys.exit("echo.py: unknown mode " + mode)
    elapsed, cpu = time.monotonic() - start, time.process_time() - cpu0
    if mode != "unary" and n != int(amount):
        sys.exit("echo.py: %s: %d of %d messages" % (mode, n, int(amount)))
    sys.stdout.write("%.1f %d %.4f\n" % (n / elapsed, n + warm, cpu / n * 10000))
    channel.close()


def main():
    if sys.argv[1] == "server":
        serve(int(sys.argv[2]))
    elif sys.argv[1] == "client":
        client(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]),
               int(sys.argv[6]) if len(sys.argv) > 6 else 1)
    else:
        sys.exit("usage: echo.py server PORT | echo.py client PORT MODE SIZE AMOUNT [INFLIGHT]")


if __name__ == "__main__":
    main()
