"""A python3-grpcio server with gRPC server reflection, for spec/cli_spec.lua
(the command's reflection client), run with Debian's /usr/bin/python3.

    reflection_server.py PORT REFLECTION_DIR [VERSIONS]

serves faults.Faults (spec/fixtures/protos/grpc/faults.proto, the handlers
of spec/grpc_server.py) and faults.Talk (a bidirectional Chat, its file
faults/talk.proto written here), plus grpc.reflection.<v>.ServerReflection
for each version in VERSIONS ("v1,v1alpha" unless given; "v1alpha" alone
makes a v1 client fall back; "none" serves no reflection). Debian packages
no grpc_reflection, so the reflection method is written here: its messages
come from python3-protobuf's message_factory over the descriptor set protoc
writes for REFLECTION_DIR/grpc/reflection/<v>/reflection.proto. Answers:
list_services, file_by_filename, file_containing_symbol (each file with its
imports, transitively; a method by its service's file; the reflection
files themselves included), anything else an ErrorResponse NOT_FOUND.

PORT 0 picks a free loopback port; the first line printed is "PORT PID";
the server exits when its standard input reaches end of file.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_server  # noqa: E402  (faults_handlers, watch_stdin, lifetime, announce)

TALK = ('syntax = "proto3";\npackage faults;\nimport "grpc/faults.proto";\n'
        "service Talk { rpc Chat(stream Request) returns (stream Reply); }\n")


def descriptor_set(include_dirs, name):
    from google.protobuf import descriptor_pb2
    args = ["protoc"] + ["-I" + d for d in include_dirs] + [
        "--include_imports", "--descriptor_set_out=/dev/stdout", name]
    out = subprocess.run(args, check=True, capture_output=True).stdout
    return descriptor_pb2.FileDescriptorSet.FromString(out).file


def main():
    from concurrent import futures
    import grpc
    from google.protobuf import descriptor_pool, message_factory

    port, refl_dir = int(sys.argv[1]), sys.argv[2]
    versions = (sys.argv[3] if len(sys.argv) > 3 else "v1,v1alpha").split(",")
    if versions == ["none"]:
        versions = []

    tmp = tempfile.mkdtemp()
    os.makedirs(os.path.join(tmp, "faults"))
    with open(os.path.join(tmp, "faults", "talk.proto"), "w") as f:
        f.write(TALK)
    files = {}
    for fd in descriptor_set([grpc_server.PROTOS, tmp], "faults/talk.proto"):
        files[fd.name] = fd
    shutil.rmtree(tmp)
    served_pool = descriptor_pool.DescriptorPool()
    for fd in files.values():  # protoc lists imports first
        served_pool.Add(fd)

    def file_of(symbol):
        """The file defining symbol (a method by its service), or None."""
        try:
            return served_pool.FindFileContainingSymbol(symbol).name
        except KeyError:
            try:
                return served_pool.FindServiceByName(symbol.rpartition(".")[0]).file.name
            except KeyError:
                return None

    def with_imports(name):
        out, seen = [], set()

        def visit(n):
            if n in seen:
                return
            seen.add(n)
            out.append(files[n].SerializeToString())
            for dep in files[n].dependency:
                visit(dep)
        visit(name)
        return out

    handlers = grpc_server.faults_handlers()
    talk = {"Chat": handlers.pop("Chat")}
    services = ["faults.Faults", "faults.Talk"]
    generic = [grpc.method_handlers_generic_handler("faults.Faults", handlers),
               grpc.method_handlers_generic_handler("faults.Talk", talk)]

    for v in versions:
        rpool = descriptor_pool.DescriptorPool()
        for fd in descriptor_set([refl_dir], "grpc/reflection/%s/reflection.proto" % v):
            rpool.Add(fd)
            files[fd.name] = fd  # reflection describes itself too
            served_pool.Add(fd)
        factory = message_factory.MessageFactory(rpool)
        Request = factory.GetPrototype(
            rpool.FindMessageTypeByName("grpc.reflection.%s.ServerReflectionRequest" % v))
        Response = factory.GetPrototype(
            rpool.FindMessageTypeByName("grpc.reflection.%s.ServerReflectionResponse" % v))
        services.append("grpc.reflection.%s.ServerReflection" % v)

        def info(requests, ctx, Response=Response):
            for req in requests:
                resp = Response(valid_host=req.host)
                resp.original_request.CopyFrom(req)
                kind = req.WhichOneof("message_request")
                name = None
                if kind == "list_services":
                    for s in services:
                        resp.list_services_response.service.add(name=s)
                    yield resp
                    continue
                if kind == "file_by_filename" and req.file_by_filename in files:
                    name = req.file_by_filename
                elif kind == "file_containing_symbol":
                    name = file_of(req.file_containing_symbol)
                if name is None:
                    resp.error_response.error_code = grpc.StatusCode.NOT_FOUND.value[0]
                    resp.error_response.error_message = "not found: %s" % kind
                else:
                    resp.file_descriptor_response.file_descriptor_proto.extend(with_imports(name))
                yield resp

        generic.append(grpc.method_handlers_generic_handler(
            "grpc.reflection.%s.ServerReflection" % v,
            {"ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                info, request_deserializer=Request.FromString,
                response_serializer=Response.SerializeToString)}))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers(generic)
    port = server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    threading.Thread(target=grpc_server.watch_stdin, daemon=True).start()
    threading.Thread(target=grpc_server.lifetime, daemon=True).start()
    grpc_server.announce(port)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
