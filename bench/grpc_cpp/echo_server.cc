// A C++ gRPC server for bench/service_bench.lua and bench/resty_bench.lua
// (Debian's libgrpc++-dev): bench.Echo/Echo returns its request, Stream sends
// `count` replies of `size` bytes, Collect counts the messages it receives,
// Chat echoes each message of its stream. Usage: echo_server PORT [CERT KEY]
// (PORT 0: a free loopback port; with CERT and KEY, PEM files, it serves TLS,
// ALPN h2). Prints "PORT PID" once listening, as spec/grpc_server.py does, and
// exits when its standard input reaches end of file.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "echo.grpc.pb.h"

namespace {

class EchoService final : public bench::Echo::Service {
  grpc::Status Echo(grpc::ServerContext *, const bench::Msg *request, bench::Msg *reply) override {
    *reply = *request;
    return grpc::Status::OK;
  }

  grpc::Status Stream(grpc::ServerContext *, const bench::StreamRequest *request,
                      grpc::ServerWriter<bench::Msg> *writer) override {
    bench::Msg m;
    m.set_data(std::string(static_cast<size_t>(request->size()), 'x'));
    for (int i = 0; i < request->count(); i++) {
      if (!writer->Write(m)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status Collect(grpc::ServerContext *, grpc::ServerReader<bench::Msg> *reader,
                       bench::Count *reply) override {
    bench::Msg m;
    int64_t n = 0;
    while (reader->Read(&m)) n++;
    reply->set_messages(n);
    return grpc::Status::OK;
  }

  grpc::Status Chat(grpc::ServerContext *,
                    grpc::ServerReaderWriter<bench::Msg, bench::Msg> *stream) override {
    bench::Msg m;
    while (stream->Read(&m)) {
      if (!stream->Write(m)) break;
    }
    return grpc::Status::OK;
  }
};

std::string slurp(const char *path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

} // namespace

int main(int argc, char **argv) {
  int port = argc > 1 ? std::atoi(argv[1]) : 0;
  EchoService service;
  grpc::ServerBuilder builder;
  int bound = 0;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (argc > 3) {
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({slurp(argv[3]), slurp(argv[2])});
    creds = grpc::SslServerCredentials(tls);
  }
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), creds, &bound);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound == 0) {
    std::fprintf(stderr, "echo_server: cannot listen on port %d\n", port);
    return 1;
  }
  std::printf("%d %d\n", bound, static_cast<int>(getpid()));
  std::fflush(stdout);
  std::thread watch([] {
    char buf[4096];
    while (read(0, buf, sizeof buf) > 0) {
    }
    std::_Exit(0);
  });
  server->Wait();
  watch.join();
  return 0;
}
