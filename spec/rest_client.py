"""python's http.client as a REST client for spec/rest_gateway_spec.lua:
reads a JSON list of requests from stdin, [{"method": "GET", "path":
"/v1/x", "headers": {"Name": "value"}, "body": "..."}], sends each on one
keep-alive connection to 127.0.0.1:PORT, and prints each answer as
"STATUS NHEADERS BODYLEN", NHEADERS lines "name: value" (names
lowercased), then the body's bytes.

    python3 spec/rest_client.py PORT < requests.json
"""
import http.client
import json
import sys


def main():
    port = int(sys.argv[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    out = []
    for r in json.load(sys.stdin):
        body = r.get("body")
        conn.request(r.get("method", "GET"), r["path"], body=body.encode("latin-1") if body is not None else None,
                     headers=r.get("headers", {}))
        resp = conn.getresponse()
        data = resp.read()
        hs = resp.getheaders()
        out.append(b"%d %d %d\n" % (resp.status, len(hs), len(data)))
        out.extend(("%s: %s\n" % (k.lower(), v)).encode("latin-1") for k, v in hs)
        out.append(data)
        if resp.will_close:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    sys.stdout.buffer.write(b"".join(out))


if __name__ == "__main__":
    main()
