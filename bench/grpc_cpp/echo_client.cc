// A C++ gRPC client for bench/service_bench.lua and bench/server_bench.lua
// (Debian's libgrpc++-dev), on one channel to 127.0.0.1:PORT:
//
//   echo_client PORT unary SIZE SECONDS [INFLIGHT]
//       bench.Echo/Echo with SIZE bytes for SECONDS after 100 warm-up calls,
//       INFLIGHT calls outstanding (default 1) on one CompletionQueue driven
//       by this one thread (the async API: as soon as a call completes the
//       next one starts);
//   echo_client PORT stream SIZE COUNT    bench.Echo/Stream: COUNT replies of SIZE bytes read;
//   echo_client PORT collect SIZE COUNT   bench.Echo/Collect: COUNT messages sent;
//   echo_client PORT chat SIZE COUNT      bench.Echo/Chat: COUNT messages sent by a second
//                                         thread while this one reads the COUNT echoes
//   (the streaming modes on the sync API after 100 warm-up unary calls).
//
// Prints "RATE TOTAL CPU": calls (or messages) per second over the measured
// part; the calls (or messages) plus the 100 warm-up calls: what the server
// handled in all, from which the benches compute its CPU per call; this
// process's CPU seconds (user + system, every thread: getrusage) per 10,000
// calls (or messages) of the measured part.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include <grpcpp/grpcpp.h>

#include "echo.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const char *what, const grpc::Status &st) {
  std::fprintf(stderr, "echo_client: %s: %s\n", what, st.error_message().c_str());
  std::exit(1);
}

// CPU seconds of this process so far.
double cpu_seconds() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One outstanding asynchronous unary call; its address is its tag.
struct Slot {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientAsyncResponseReader<bench::Msg>> reader;
  bench::Msg reply;
  grpc::Status status;

  void start(bench::Echo::Stub &stub, const bench::Msg &request, grpc::CompletionQueue &cq) {
    ctx = std::make_unique<grpc::ClientContext>();
    reader = stub.PrepareAsyncEcho(ctx.get(), request, &cq);
    reader->StartCall();
    reader->Finish(&reply, &status, this);
  }
};

// Unary calls with `inflight` outstanding for `seconds`; returns the count.
long unary(bench::Echo::Stub &stub, const bench::Msg &request, int inflight, double seconds,
           double *elapsed) {
  grpc::CompletionQueue cq;
  std::vector<Slot> slots(static_cast<size_t>(inflight));
  for (auto &s : slots) s.start(stub, request, cq);
  int outstanding = inflight;
  long n = 0;
  auto start = Clock::now();
  void *tag = nullptr;
  bool ok = false;
  while (outstanding > 0 && cq.Next(&tag, &ok)) {
    auto *s = static_cast<Slot *>(tag);
    if (!ok || !s->status.ok()) fail("Echo", s->status);
    n++;
    if (since(start) < seconds) {
      s->start(stub, request, cq);
    } else {
      outstanding--;
    }
  }
  *elapsed = since(start);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return n;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: echo_client PORT unary SIZE SECONDS [INFLIGHT]\n"
                         "       echo_client PORT stream|collect|chat SIZE COUNT\n");
    return 2;
  }
  auto channel =
      grpc::CreateChannel(std::string("127.0.0.1:") + argv[1], grpc::InsecureChannelCredentials());
  auto stub = bench::Echo::NewStub(channel);
  const char *mode = argv[2];
  int size = std::atoi(argv[3]);
  bench::Msg request;
  request.set_data(std::string(static_cast<size_t>(size), 'x'));
  for (int i = 0; i < 100; i++) { // warm up: the connection, the first calls
    grpc::ClientContext ctx;
    bench::Msg reply;
    grpc::Status st = stub->Echo(&ctx, request, &reply);
    if (!st.ok()) fail("Echo", st);
  }
  long warm = 100;
  double elapsed = 0;
  double cpu0 = cpu_seconds();
  long n = 0;
  if (std::strcmp(mode, "unary") == 0) {
    int inflight = argc > 5 ? std::atoi(argv[5]) : 1;
    if (inflight < 1) inflight = 1;
    n = unary(*stub, request, inflight, std::atof(argv[4]), &elapsed);
    std::printf("%.1f %ld %.4f\n", n / elapsed, n + warm, (cpu_seconds() - cpu0) / n * 10000);
    return 0;
  }
  long count = std::atol(argv[4]);
  auto start = Clock::now();
  grpc::ClientContext ctx;
  if (std::strcmp(mode, "stream") == 0) {
    bench::StreamRequest req;
    req.set_count(static_cast<int32_t>(count));
    req.set_size(size);
    auto reader = stub->Stream(&ctx, req);
    bench::Msg m;
    while (reader->Read(&m)) n++;
    grpc::Status st = reader->Finish();
    if (!st.ok()) fail("Stream", st);
  } else if (std::strcmp(mode, "collect") == 0) {
    bench::Count reply;
    auto writer = stub->Collect(&ctx, &reply);
    for (long i = 0; i < count; i++) {
      if (!writer->Write(request)) break;
    }
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    if (!st.ok()) fail("Collect", st);
    n = static_cast<long>(reply.messages());
  } else if (std::strcmp(mode, "chat") == 0) {
    auto stream = stub->Chat(&ctx);
    std::thread sender([&] {
      for (long i = 0; i < count; i++) {
        if (!stream->Write(request)) break;
      }
      stream->WritesDone();
    });
    bench::Msg m;
    while (stream->Read(&m)) n++;
    sender.join();
    grpc::Status st = stream->Finish();
    if (!st.ok()) fail("Chat", st);
  } else {
    std::fprintf(stderr, "echo_client: unknown mode %s\n", mode);
    return 2;
  }
  elapsed = since(start);
  if (n != count) {
    std::fprintf(stderr, "echo_client: %s: %ld of %ld messages\n", mode, n, count);
    return 1;
  }
  std::printf("%.1f %ld %.4f\n", n / elapsed, warm + n, (cpu_seconds() - cpu0) / n * 10000);
  return 0;
}
