// C++ baseline for bench/codec_bench.lua: the C++ library's generated code
// (Debian's libprotobuf-dev + protoc), built by the bench script.
//   codec_cpp DIR OTLP_BIN TAT3_BIN            time every case; also writes
//                                              DIR/point.bin, DIR/rich.bin
//   codec_cpp DIR OTLP_BIN TAT3_BIN CASE OP N  run one op N times (callgrind;
//                                              OP decode, encode or decode_fresh)
// Prints "case decode_ns encode_ns bytes decode_fresh_ns" per case: decode
// parses into one reused message (the C++ library's fastest way), decode_fresh
// into a message on a new google::protobuf::Arena each time (what a server
// does per request).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <google/protobuf/arena.h>
#include <string>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "point.pb.h"
#include "google/protobuf/test_messages_proto3.pb.h"

static std::string slurp(const char *path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

static void spit(const std::string &path, const std::string &data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class M> static double time_decode(const std::string &bytes, long n) {
  M m;
  double t0 = now();
  for (long i = 0; i < n; i++) {
    if (!m.ParseFromString(bytes)) std::abort();
  }
  return (now() - t0) / n * 1e9;
}

template <class M> static double time_decode_fresh(const std::string &bytes, long n) {
  double t0 = now();
  for (long i = 0; i < n; i++) {
    google::protobuf::Arena arena;
    M *m = google::protobuf::Arena::CreateMessage<M>(&arena);
    if (!m->ParseFromString(bytes)) std::abort();
  }
  return (now() - t0) / n * 1e9;
}

template <class M> static double time_encode(const std::string &bytes, long n) {
  M m;
  m.ParseFromString(bytes);
  std::string out;
  double t0 = now();
  for (long i = 0; i < n; i++) {
    out.clear();
    m.SerializeToString(&out);
  }
  return (now() - t0) / n * 1e9;
}

template <class M> static double best(double (*f)(const std::string &, long), const std::string &b) {
  long n = 1;
  while (f(b, n) * n < 5e7) n *= 4;  // at least 50 ms a run
  double bestv = 1e30;
  for (int r = 0; r < 5; r++) {
    double v = f(b, n);
    if (v < bestv) bestv = v;
  }
  return bestv;
}

template <class M> static void run(const char *name, const std::string &bytes, const char *only,
                                   const char *op, long iters) {
  if (only != nullptr) {
    if (std::strcmp(only, name) != 0) return;
    if (std::strcmp(op, "decode") == 0) time_decode<M>(bytes, iters);
    else if (std::strcmp(op, "decode_fresh") == 0) time_decode_fresh<M>(bytes, iters);
    else time_encode<M>(bytes, iters);
    return;
  }
  double d = best<M>(time_decode<M>, bytes);
  double e = best<M>(time_encode<M>, bytes);
  double f = best<M>(time_decode_fresh<M>, bytes);
  std::printf("%s %.2f %.2f %zu %.2f\n", name, d, e, bytes.size(), f);
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  std::string dir = argv[1];
  const char *only = argc >= 7 ? argv[4] : nullptr;
  const char *op = argc >= 7 ? argv[5] : nullptr;
  long iters = argc >= 7 ? std::atol(argv[6]) : 0;

  bench::Point p;
  p.set_x(1000);
  p.set_y(2000000);
  p.set_z(7);
  std::string point = p.SerializeAsString();

  bench::Rich r;
  r.set_name("Ada Lovelace");
  r.set_email("ada@example.com");
  r.set_avatar(std::string(64, '\x89'));
  for (int i = 0; i < 20; i++) r.add_scores(i * 1000003LL - 5000);
  r.mutable_home()->set_street("12 St James's Square");
  r.mutable_home()->set_city("London");
  r.mutable_home()->set_zip(12345);
  for (int i = 0; i < 3; i++) {
    auto *a = r.add_others();
    a->set_street("Street " + std::to_string(i));
    a->set_city("City");
    a->set_zip(10000 + i);
  }
  (*r.mutable_labels())["team"] = "analytical engine";
  (*r.mutable_labels())["role"] = "programmer";
  r.set_kind(bench::KIND_ADMIN);
  r.set_ratio(0.618);
  r.set_active(true);
  for (int i = 0; i < 5; i++) {
    auto *q = r.add_path();
    q->set_x(i);
    q->set_y(i * 100);
    q->set_z(i * 10000);
  }
  std::string rich;
  r.SerializeToString(&rich);  // the bench decodes these bytes; map order as C++ wrote it

  if (only == nullptr) {
    spit(dir + "/point.bin", point);
    spit(dir + "/rich.bin", rich);
  }
  run<bench::Point>("point", point, only, op, iters);
  run<bench::Rich>("rich", rich, only, op, iters);
  run<opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest>(
      "otlp_traces", slurp(argv[2]), only, op, iters);
  run<protobuf_test_messages::proto3::TestAllTypesProto3>("test_all_types_proto3",
                                                          slurp(argv[3]), only, op, iters);
  return 0;
}
