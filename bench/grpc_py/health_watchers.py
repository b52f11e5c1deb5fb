"""Idle grpc.health.v1.Health/Watch streams with Debian's python3-grpcio,
for bench/health_bench.lua:

    health_watchers.py PORT N

opens N Watch streams (service "", the request's bytes empty) to
127.0.0.1:PORT over ceil(N / 5000) channels, reads the first status of
each, prints "ready N" and holds them until its standard input reaches end
of file (and 600 s in any case), then cancels them.
"""
import sys
import threading

import grpc


def main():
    port, n = sys.argv[1], int(sys.argv[2])
    channels = [grpc.insecure_channel("127.0.0.1:" + port) for _ in range((n + 4999) // 5000)]
    calls = []
    for i in range(n):
        watch = channels[i % len(channels)].unary_stream(
            "/grpc.health.v1.Health/Watch",
            request_serializer=lambda b: b, response_deserializer=lambda b: b)
        calls.append(watch(b"", timeout=600))
    for c in calls:
        next(c)
    print("ready", len(calls), flush=True)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    done.wait(600)
    for c in calls:
        c.cancel()


if __name__ == "__main__":
    main()
