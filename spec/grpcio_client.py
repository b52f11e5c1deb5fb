"""A python3-grpcio client (Debian's /usr/bin/python3) for
spec/server_grpcio_spec.lua: calls srv.Calc on a protocall server with raw
message bytes and prints one line per check, then "done".

  /usr/bin/python3 spec/grpcio_client.py PORT [CA_FILE]

With CA_FILE the channel is TLS (the server's certificate for localhost).
"""
import json
import sys
import time

import grpc

# grpc-core's retries on (gRFC A6), so that it honours the server's pushback.
RETRY = json.dumps({"methodConfig": [{"name": [{"service": "srv.Calc"}], "retryPolicy": {
    "maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
    "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]})


def point(x=0, y=0, note=b""):
    out = b""
    if x:
        out += b"\x08" + bytes([x])
    if y:
        out += b"\x10" + bytes([y])
    if note:
        out += b"\x1a" + bytes([len(note)]) + note
    return out


def main():
    port = sys.argv[1]
    target = "localhost:" + port
    options = [("grpc.enable_retries", 1), ("grpc.service_config", RETRY)]
    if len(sys.argv) > 2:
        creds = grpc.ssl_channel_credentials(open(sys.argv[2], "rb").read())
        ch = grpc.secure_channel(target, creds, options=options)
    else:
        ch = grpc.insecure_channel("127.0.0.1:" + port, options=options)
    add = ch.unary_unary("/srv.Calc/Add")
    count = ch.unary_stream("/srv.Calc/Count")
    total = ch.stream_unary("/srv.Calc/Total")
    double = ch.stream_stream("/srv.Calc/Double")
    nope = ch.unary_unary("/srv.Calc/Nope")
    print("unary", add(point(2, 3), timeout=10).hex())
    resp, call = add.with_call(point(1, 1, b"meta"), metadata=[("x-user", "ann"), ("x-pad", " p ")],
                               timeout=10)
    print("trailer", dict(call.trailing_metadata()).get("x-trail"))
    # values with leading or trailing spaces, both ways (gRPC allows them)
    print("spaces", repr(dict(call.initial_metadata()).get("x-sp")),
          repr(dict(call.trailing_metadata()).get("x-pad")))
    print("stream", ",".join(r.hex() for r in count(point(3), timeout=10)))
    print("client_stream", total(iter([point(1), point(2), point(3)]), timeout=10).hex())
    print("bidi", ",".join(r.hex() for r in double(iter([point(1), point(2)]), timeout=10)))
    for name, fn in (("fail", lambda: add(point(note=b"fail"), timeout=10)),
                     ("unknown", lambda: nope(b"", timeout=10)),
                     ("crash", lambda: add(point(note=b"crash"), timeout=10)),
                     ("deadline", lambda: add(point(note=b"sleep"), timeout=0.3))):
        try:
            fn()
            print(name, "OK")
        except grpc.RpcError as e:
            print(name, e.code().name, e.details())
    # a pc.Error's metadata and retry_delay: trailers, and a pushback of
    # 0.3 s that grpc-core waits before each of its two retries
    start = time.monotonic()
    try:
        add(point(30, note=b"pushback"), timeout=10)
    except grpc.RpcError as e:
        md = dict(e.trailing_metadata())
        print("pushback", e.code().name, md.get("x-why"), md.get("grpc-retry-pushback-ms"),
              "waited" if time.monotonic() - start >= 0.55 else "did not wait")
    # a negative retry_delay: grpc-core does not retry (one attempt)
    try:
        add(point(note=b"stop"), timeout=10)
    except grpc.RpcError as e:
        print("stop", e.code().name, dict(e.trailing_metadata()).get("grpc-retry-pushback-ms"))
    print("stops", add(point(note=b"stops"), timeout=10).hex())
    print("done")


if __name__ == "__main__":
    main()
