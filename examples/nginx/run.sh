#!/bin/sh
# examples/nginx/run.sh PREFIX PORT: fills in examples/nginx/nginx.conf
# (@ROOT@ = this repository, @PORT@ = PORT) as PREFIX/conf/nginx.conf and
# runs nginx in the foreground with that prefix (logs in PREFIX/logs, the
# pid file PREFIX/logs/nginx.pid, temp files in PREFIX/temp). Set
# PROTOCALL_UPSTREAM to the gRPC server's host:port first, e.g.
#   sleep 3600 | PC_SERVER_LIFETIME=3600 PC_SERVER_WORKERS=64 /usr/bin/python3 spec/grpc_server.py grpc 50051 &
# (the test server stops when its standard input closes, and after
# PC_SERVER_LIFETIME seconds)
#   PROTOCALL_UPSTREAM=127.0.0.1:50051 examples/nginx/run.sh build/nginx 8080
#   curl 'http://127.0.0.1:8080/unary?text=hi'
# Run as root, the worker stays root (nginx's default user "nobody" could
# not read the repository or write the prefix).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 PREFIX PORT" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1/conf" "$1/logs" "$1/temp"
prefix=$(cd "$1" && pwd)
sed -e "s|@ROOT@|$root|g" -e "s|@PORT@|$2|g" "$root/examples/nginx/nginx.conf" > "$prefix/conf/nginx.conf"
set -- -p "$prefix/" -c "$prefix/conf/nginx.conf" -e "$prefix/logs/error.log"
[ "$(id -u)" -ne 0 ] || set -- "$@" -g "user root;"
exec nginx "$@"
