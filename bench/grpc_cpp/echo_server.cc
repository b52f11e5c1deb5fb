// A C++ gRPC server for bench/service_bench.lua and bench/resty_bench.lua
// (Debian's libgrpc++-dev): bench.Echo/Echo returns its request, Stream sends
// `count` replies of `size` bytes, Collect counts the messages it receives,
// Chat echoes each message of its stream. Usage:
//   echo_server [-async THREADS] PORT [CERT KEY]
// (PORT 0: a free loopback port; with CERT and KEY, PEM files, it serves TLS,
// ALPN h2). Prints "PORT PID" once listening, as spec/grpc_server.py does, and
// exits when its standard input reaches end of file.
// By default every method is on the sync API with grpc++'s defaults (one
// completion queue, 1 to 2 polling threads: a thread that picks a call up
// runs its handler while another takes over the polling); most server
// benches compare protocall's server with that. With -async THREADS, Echo is
// on the async API instead: THREADS completion queues, each driven by one
// thread of this program that answers a call where it arrives (grpc's own
// QPS benchmarks serve this way), the other methods still on the sync API.
// bench/gateway_nginx_bench.lua runs it with -async 1 (one thread for the
// server on a machine of 2 cores): about half the sync server's CPU
// per unary call; bench/server_bench.lua runs both and judges its goals
// against the better of the two.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "echo.grpc.pb.h"

namespace {

class EchoService : public bench::Echo::Service {
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

// Echo on the async API, the other methods on EchoService's sync ones.
using AsyncEcho = bench::Echo::WithAsyncMethod_Echo<EchoService>;

// One Echo call of the async API: requested, then answered; its address is
// its tag on the completion queue.
class EchoCall {
public:
  EchoCall(AsyncEcho *service, grpc::ServerCompletionQueue *cq) : service_(service), cq_(cq) {
    service_->RequestEcho(&ctx_, &request_, &writer_, cq_, cq_, this);
  }

  // The call's next step, `ok` as the completion queue gave it: a request
  // arrived (ask for the next one, answer this) or the answer was sent.
  void step(bool ok) {
    if (!ok || answered_) {
      // shut down before a request came, or done
      delete this;
      return;
    }
    new EchoCall(service_, cq_);
    answered_ = true;
    writer_.Finish(request_, grpc::Status::OK, this);
  }

private:
  AsyncEcho *service_;
  grpc::ServerCompletionQueue *cq_;
  grpc::ServerContext ctx_;
  bench::Msg request_;
  grpc::ServerAsyncResponseWriter<bench::Msg> writer_{&ctx_};
  bool answered_ = false;
};

std::string slurp(const char *path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

} // namespace

int main(int argc, char **argv) {
  int threads = 0; // -async THREADS; 0: every method on the sync API
  if (argc > 2 && std::strcmp(argv[1], "-async") == 0) {
    threads = std::atoi(argv[2]);
    if (threads < 1) {
      std::fprintf(stderr, "echo_server: -async: a number of threads >= 1 expected, got %s\n",
                   argv[2]);
      return 2;
    }
    argc -= 2;
    argv += 2;
  }
  int port = argc > 1 ? std::atoi(argv[1]) : 0;
  EchoService service;
  AsyncEcho async_service;
  grpc::ServerBuilder builder;
  int bound = 0;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (argc > 3) {
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({slurp(argv[3]), slurp(argv[2])});
    creds = grpc::SslServerCredentials(tls);
  }
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), creds, &bound);
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
  if (threads > 0) {
    builder.RegisterService(&async_service);
    for (int i = 0; i < threads; i++) cqs.push_back(builder.AddCompletionQueue());
  } else {
    builder.RegisterService(&service);
  }
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
  std::vector<std::thread> drivers;
  for (auto &cq : cqs) {
    grpc::ServerCompletionQueue *q = cq.get();
    drivers.emplace_back([&async_service, q] {
      new EchoCall(&async_service, q);
      void *tag = nullptr;
      bool ok = false;
      while (q->Next(&tag, &ok)) static_cast<EchoCall *>(tag)->step(ok);
    });
  }
  server->Wait();
  for (auto &t : drivers) t.join();
  watch.join();
  return 0;
}
