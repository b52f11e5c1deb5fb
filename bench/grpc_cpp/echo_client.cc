// A C++ gRPC client for bench/service_bench.lua (Debian's libgrpc++-dev):
// calls bench.Echo/Echo with SIZE bytes, one call at a time on one channel,
// for SECONDS after 100 warm-up calls, and prints calls per second.
// Usage: echo_client PORT SIZE SECONDS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <grpcpp/grpcpp.h>

#include "echo.grpc.pb.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: echo_client PORT SIZE SECONDS\n");
    return 2;
  }
  auto channel =
      grpc::CreateChannel(std::string("127.0.0.1:") + argv[1], grpc::InsecureChannelCredentials());
  auto stub = bench::Echo::NewStub(channel);
  bench::Msg request;
  request.set_data(std::string(static_cast<size_t>(std::atol(argv[2])), 'x'));
  double seconds = std::atof(argv[3]);
  auto call = [&] {
    grpc::ClientContext ctx;
    bench::Msg reply;
    grpc::Status st = stub->Echo(&ctx, request, &reply);
    if (!st.ok()) {
      std::fprintf(stderr, "echo_client: %s\n", st.error_message().c_str());
      std::exit(1);
    }
  };
  for (int i = 0; i < 100; i++) call();
  using clock = std::chrono::steady_clock;
  long n = 0;
  auto start = clock::now();
  std::chrono::duration<double> elapsed{};
  do {
    call();
    n++;
    elapsed = clock::now() - start;
  } while (elapsed.count() < seconds);
  std::printf("%.1f\n", n / elapsed.count());
  return 0;
}
