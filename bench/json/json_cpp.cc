// C++ baseline for bench/json_bench.lua: the C++ library's
// util::MessageToJsonString / JsonStringToMessage over generated code
// (Debian's libprotobuf-dev + protoc), built by the bench script.
//   json_cpp OTLP_BIN OTLP_JSON TAT3_BIN TAT3_JSON
// Prints "case to_json_ns from_json_ns" per case (best of 5 runs of at
// least 50 ms each).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <google/protobuf/util/json_util.h>

#include "google/protobuf/test_messages_proto3.pb.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

static std::string slurp(const char *path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class M> static double time_to(const M &m, const std::string &, long n) {
  std::string out;
  double t0 = now();
  for (long i = 0; i < n; i++) {
    out.clear();
    if (!google::protobuf::util::MessageToJsonString(m, &out).ok()) std::abort();
  }
  return (now() - t0) / n * 1e9;
}

template <class M> static double time_from(const M &, const std::string &json, long n) {
  double t0 = now();
  for (long i = 0; i < n; i++) {
    M m;
    if (!google::protobuf::util::JsonStringToMessage(json, &m).ok()) std::abort();
  }
  return (now() - t0) / n * 1e9;
}

template <class M>
static double best(double (*f)(const M &, const std::string &, long), const M &m,
                   const std::string &json) {
  long n = 1;
  while (f(m, json, n) * n < 5e7) n *= 4;
  double b = 1e30;
  for (int r = 0; r < 5; r++) {
    double v = f(m, json, n);
    if (v < b) b = v;
  }
  return b;
}

template <class M> static void run(const char *name, const char *bin, const char *json) {
  M m;
  if (!m.ParseFromString(slurp(bin))) std::abort();
  std::string doc = slurp(json);
  double to = best<M>(time_to<M>, m, doc);
  double from = best<M>(time_from<M>, m, doc);
  std::printf("%s %.1f %.1f\n", name, to, from);
}

int main(int argc, char **argv) {
  if (argc != 5) return 2;
  run<opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest>("otlp_traces", argv[1],
                                                                             argv[2]);
  run<protobuf_test_messages::proto3::TestAllTypesProto3>("test_all_types_proto3", argv[3], argv[4]);
  return 0;
}
