"""Many concurrent HTTP/1.1 POSTs for spec/stall_spec.lua (asyncio, one
connection each, Connection: close):

    python3 spec/stall_client.py PORT PATH COUNT SIZE TAG [HEADER ...]

sends COUNT requests to 127.0.0.1:PORT at once, request i with the JSON
body {"text": "TAG-i-" + SIZE letters}, each with the extra HEADER lines
("Name: value"). Prints "sent" once every request is written (flushed),
then, when every answer is in: "status CODE COUNT" lines, "echoed N"
(answers 200 whose body is {"text": ...} with their own request's text),
"mismatched N" (200 with another text), "failed N" (no HTTP answer),
"slowest SECONDS" (from the start to the last answer), and the first
non-200 body as "body TEXT". A client waits 120 s for its answer, or
env STALL_GIVE_UP seconds, then closes its connection (a failure).
"""
import asyncio
import json
import os
import sys
import time

GIVE_UP = float(os.environ.get("STALL_GIVE_UP", "120"))


async def one(port, path, i, size, tag, headers, sent, results):
    text = "%s-%d-%s" % (tag, i, "x" * size)
    body = json.dumps({"text": text}).encode()
    head = "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" \
           "Content-Length: %d\r\nConnection: close\r\n" % (path, len(body))
    head += "".join(h + "\r\n" for h in headers) + "\r\n"
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(head.encode() + body)
        await w.drain()
    except OSError as e:
        results.append((None, str(e), text))
        return
    finally:
        one.count += 1
        if one.count == one.total and not sent.done():
            sent.set_result(None)
    try:
        data = await asyncio.wait_for(r.read(), GIVE_UP)
        w.close()
    except (OSError, asyncio.TimeoutError) as e:
        w.close()
        results.append((None, repr(e), text))
        return
    head, _, payload = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else None
    results.append((status, payload.decode("latin-1"), text))


async def main():
    port, path, count, size, tag = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    headers = sys.argv[6:]
    loop = asyncio.get_running_loop()
    sent = loop.create_future()
    one.count, one.total = 0, count
    results = []
    start = time.monotonic()
    tasks = [asyncio.ensure_future(one(port, path, i, size, tag, headers, sent, results)) for i in range(count)]
    await sent
    print("sent", flush=True)
    await asyncio.gather(*tasks)
    slowest = time.monotonic() - start
    statuses = {}
    echoed = mismatched = failed = 0
    first = None
    for status, payload, text in results:
        if status is None:
            failed += 1
            first = first or payload
            continue
        statuses[status] = statuses.get(status, 0) + 1
        if status == 200:
            try:
                got = json.loads(payload).get("text")
            except ValueError:
                got = None
            if got == text:
                echoed += 1
            else:
                mismatched += 1
        elif first is None:
            first = payload
    for status in sorted(statuses):
        print("status %d %d" % (status, statuses[status]))
    print("echoed %d" % echoed)
    print("mismatched %d" % mismatched)
    print("failed %d" % failed)
    print("slowest %.3f" % slowest)
    if first is not None:
        print("body " + first.replace("\n", " "))


if __name__ == "__main__":
    asyncio.run(main())
