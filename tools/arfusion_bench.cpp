// arfusion-bench: the main job. Sweeps message sizes on the GPUs present, times every path in the
// same run (CUDA-graph replay, median of 7, max over ranks), prints a table, writes CSV and JSON,
// and draws a PNG plot (tools/plot_bench.py, if python3 with matplotlib is there).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_harness.h"

using arfbench::Path;
using arfusion::DType;
using arfusion::Op;

namespace {

void usage() {
  std::printf(
      "usage: arfusion-bench [options]\n"
      "  Times allreduce + residual add + RMSNorm per message size for every path (NCCL allreduce,\n"
      "  add-RMSNorm alone, the NCCL path, one-shot, two-shot, Auto) on the GPUs of this machine.\n"
      "  --world N          ranks (one GPU each; default: all visible GPUs)\n"
      "  --local N          N ranks sharing GPU 0 instead (what one GPU can time: the fused kernels\n"
      "                     and add-RMSNorm, each rank on SMs / N blocks; no NCCL, no link)\n"
      "  --out-format F     add a quantized output to the norm: none (default) | fp8 | fp8-token |\n"
      "                     fp8-group | nvfp4 (scales in the GEMMs' layouts: column-major, swizzled)\n"
      "  --no-norm-out      with --out-format: the quantized output instead of norm_out (what an\n"
      "                     engine whose next GEMM reads the quantized row asks for)\n"
      "  --min-bytes B      smallest message (default 8192)\n"
      "  --max-bytes B      largest message (default 268435456 = 256 MiB)\n"
      "  --per-octave K     sizes per doubling (default 2)\n"
      "  --hidden H[,H]     hidden sizes (default 4096,8192)\n"
      "  --dtypes D[,D]     bf16, fp16, fp32 (default bf16,fp16)\n"
      "  --op OP            allreduce_add_rmsnorm (default) | allreduce_add | allreduce\n"
      "  --out DIR          where results.csv, results.json and results.png go (default arfusion-bench-out)\n"
      "  --help             this text\n");
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) out.push_back(x);
  return out;
}

bool parseDType(const std::string& s, DType* d) {
  if (s == "bf16") *d = DType::kBFloat16;
  else if (s == "fp16") *d = DType::kFloat16;
  else if (s == "fp32") *d = DType::kFloat32;
  else return false;
  return true;
}

struct Row {
  DType dtype;
  int64_t hidden, tokens, bytes;
  double us[7] = {};
  std::string err[7];
  std::string pick;
};

}  // namespace

int main(int argc, char** argv) {
  int world = 0, local = 0, per_octave = 2;
  arfusion::QuantFormat quant = arfusion::QuantFormat::kNone;
  bool norm_out = true;
  int64_t min_bytes = 8192, max_bytes = int64_t(256) << 20;
  std::vector<int64_t> hiddens = {4096, 8192};
  std::vector<DType> dtypes = {DType::kBFloat16, DType::kFloat16};
  Op op = Op::kAllReduceAddRMSNorm;
  std::string out_dir = "arfusion-bench-out";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "arfusion-bench: %s needs a value\n", a.c_str());
        std::exit(arfbench::kExitUsage);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") { usage(); return arfbench::kExitOk; }
    else if (a == "--world") world = std::atoi(next().c_str());
    else if (a == "--local") local = std::atoi(next().c_str());
    else if (a == "--out-format") {
      const std::string f = next();
      if (!arfbench::parseQuantFormat(f, &quant)) {
        std::fprintf(stderr, "arfusion-bench: unknown output format %s (none, fp8, fp8-token, fp8-group, nvfp4)\n", f.c_str());
        return arfbench::kExitUsage;
      }
    }
    else if (a == "--no-norm-out") norm_out = false;
    else if (a == "--min-bytes") min_bytes = std::atoll(next().c_str());
    else if (a == "--max-bytes") max_bytes = std::atoll(next().c_str());
    else if (a == "--per-octave") per_octave = std::max(1, std::atoi(next().c_str()));
    else if (a == "--out") out_dir = next();
    else if (a == "--hidden") { hiddens.clear(); for (auto& h : split(next())) hiddens.push_back(std::atoll(h.c_str())); }
    else if (a == "--dtypes") {
      dtypes.clear();
      for (auto& s : split(next())) {
        DType d;
        if (!parseDType(s, &d)) { std::fprintf(stderr, "arfusion-bench: unknown dtype %s\n", s.c_str()); return arfbench::kExitUsage; }
        dtypes.push_back(d);
      }
    } else if (a == "--op") {
      const std::string o = next();
      if (o == "allreduce") op = Op::kAllReduce;
      else if (o == "allreduce_add") op = Op::kAllReduceAdd;
      else if (o != "allreduce_add_rmsnorm") { std::fprintf(stderr, "arfusion-bench: unknown op %s\n", o.c_str()); return arfbench::kExitUsage; }
    } else { std::fprintf(stderr, "arfusion-bench: unknown option %s (see --help)\n", a.c_str()); return arfbench::kExitUsage; }
  }
  int ngpu = 0;
  if (const std::string why = arfbench::gpuShortfall(1, &ngpu); !why.empty()) {
    std::fprintf(stderr, "arfusion-bench: %s; nothing to measure.\n", why.c_str());
    return arfbench::kExitSkip;
  }
  if (local != 0 && (local < 2 || local > 8)) {
    std::fprintf(stderr, "arfusion-bench: --local takes 2 to 8 ranks (got %d)\n", local);
    return arfbench::kExitUsage;
  }
  if (quant != arfusion::QuantFormat::kNone && op != Op::kAllReduceAddRMSNorm) {
    std::fprintf(stderr, "arfusion-bench: --out-format needs --op allreduce_add_rmsnorm\n");
    return arfbench::kExitUsage;
  }
  if (!norm_out && quant == arfusion::QuantFormat::kNone) {
    std::fprintf(stderr, "arfusion-bench: --no-norm-out needs --out-format (a call writes norm_out or a quantized row)\n");
    return arfbench::kExitUsage;
  }
  if (local) {
    world = local;
  } else {
    if (world == 0) world = ngpu;
    if (world < 2 || world > ngpu) {
      std::fprintf(stderr, "arfusion-bench: the allreduce is timed with one rank per GPU, on 2 to %d GPUs; this machine has %d%s"
                   " (--local N times N ranks on one GPU).\n",
                   std::max(2, ngpu), ngpu, world > ngpu ? " (fewer than --world)" : "");
      return arfbench::kExitSkip;
    }
  }
  arfbench::Group g(world, arfusion::Config(), local != 0);
  if (!g.error().empty()) {
    std::fprintf(stderr, "arfusion-bench: %s\n", g.error().c_str());
    return arfbench::kExitFailed;
  }
  const Path paths[] = {Path::kNcclAllReduce, Path::kAddRMSNorm, Path::kNcclPath, Path::kOneShot, Path::kTwoShot, Path::kAuto};
  const int kPaths = 6;
  std::vector<Row> rows;
  for (DType d : dtypes)
    for (int64_t h : hiddens) {
      const int64_t row_bytes = h * (d == DType::kFloat32 ? 4 : 2);
      for (double b = double(min_bytes); b <= double(max_bytes) * 1.0001; b *= std::pow(2.0, 1.0 / per_octave)) {
        const int64_t tokens = std::max<int64_t>(1, std::llround(b / row_bytes));
        if (!rows.empty() && rows.back().tokens == tokens && rows.back().hidden == h && rows.back().dtype == d) continue;
        Row r{d, h, tokens, tokens * row_bytes};
        rows.push_back(r);
      }
    }
  // Peer bandwidth of this machine, in the same run: copy engine and SM stores.
  auto peerGBs = [&](Path p) {  // GB/s per direction moving 8192 x 8192 bf16 (128 MiB); 0 if it failed
    if (local) return 0.0;
    const arfbench::Timing t = g.time(p, op, DType::kBFloat16, 8192, 8192);
    return t.error.empty() ? (8192.0 * 8192 * 2) / (t.us * 1e-6) / 1e9 : 0.0;
  };
  const double peer_gbs = peerGBs(Path::kPeerCopy), store_gbs = peerGBs(Path::kPeerStore);
  const bool tty = isatty(fileno(stderr));
  for (size_t i = 0; i < rows.size(); ++i) {
    Row& r = rows[i];
    for (int p = 0; p < kPaths; ++p) {
      // A local group has no NCCL: its columns stay empty, not failed.
      if (local && (paths[p] == Path::kNcclAllReduce || paths[p] == Path::kNcclPath)) {
        r.us[p] = NAN;
        continue;
      }
      const arfbench::Timing t = g.time(paths[p], op, r.dtype, r.tokens, r.hidden, quant, false, norm_out);
      r.us[p] = t.error.empty() ? t.us : NAN;
      r.err[p] = t.error;
      if (paths[p] == Path::kAuto) r.pick = t.plan;
    }
    if (tty) {
      const int w = 40, done = int(w * (i + 1) / rows.size());
      std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu", done, "========================================", w - done, "", i + 1, rows.size());
    } else {
      std::fprintf(stderr, "measured %zu/%zu: %s %lld x %lld\n", i + 1, rows.size(), arfusion::toString(r.dtype), (long long)r.tokens, (long long)r.hidden);
    }
  }
  if (tty) std::fprintf(stderr, "\n");

  // Table, CSV, JSON.
  std::system(("mkdir -p '" + out_dir + "'").c_str());
  std::ofstream csv(out_dir + "/results.csv"), json(out_dir + "/results.json");
  csv << "dtype,hidden,tokens,bytes";
  for (int p = 0; p < kPaths; ++p) csv << "," << arfbench::pathName(paths[p]) << "_us";
  csv << ",fastest,auto_pick,auto_speedup_vs_nccl_path,auto_vs_fastest\n";
  json << "{\n  \"device\": \"" << g.deviceName() << "\", \"world\": " << world << ", \"local\": " << (local ? "true" : "false")
       << ", \"out_format\": \"" << arfusion::toString(quant) << "\", \"norm_out\": " << (norm_out ? "true" : "false")
       << ", \"op\": \"" << arfusion::toString(op)
       << "\", \"peer_copy_GBs\": " << peer_gbs << ", \"peer_store_GBs\": " << store_gbs << ",\n  \"rows\": [\n";
  std::printf("arfusion-bench: %s x %d%s, %s%s%s%s, CUDA-graph replay, us per call (median of 7, max over ranks)\n",
              g.deviceName().c_str(), world, local ? " ranks on one GPU (a share of its SMs each; no link, no NCCL)" : "",
              arfusion::toString(op), quant != arfusion::QuantFormat::kNone ? " + " : "",
              quant != arfusion::QuantFormat::kNone ? arfusion::toString(quant) : "", norm_out ? "" : " instead of norm_out");
  if (!local) std::printf("peer bandwidth, all ranks writing at once, 128 MiB: copy engine %.0f GB/s, SM stores %.0f GB/s per direction\n",
              peer_gbs, store_gbs);
  std::printf("%-5s %6s %6s %10s %9s %9s %9s %9s %9s %9s  %-8s %-16s %8s %8s\n", "dtype", "hidden", "tokens", "bytes", "nccl_ar",
              "addnorm", "nccl+nrm", "oneshot", "twoshot", "auto", "fastest", "auto pick", "vs nccl", "vs best");
  int slower_than_nccl = 0, off_best = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    int best = -1;
    for (int p : {2, 3, 4})
      if (!std::isnan(r.us[p]) && (best < 0 || r.us[p] < r.us[best])) best = p;
    const double vs_nccl = r.us[2] / r.us[5], vs_best = best >= 0 ? r.us[best] / r.us[5] : NAN;
    if (vs_nccl < 1 / 1.03) ++slower_than_nccl;
    if (vs_best < 1 / 1.05) ++off_best;
    std::printf("%-5s %6lld %6lld %10lld", arfusion::toString(r.dtype), (long long)r.hidden, (long long)r.tokens, (long long)r.bytes);
    for (int p = 0; p < kPaths; ++p) std::printf(" %9.1f", r.us[p]);
    std::printf("  %-8s %-16s %7.2fx %7.2fx\n", best >= 0 ? arfbench::pathName(paths[best]) : "-", r.pick.c_str(), vs_nccl, vs_best);
    csv << arfusion::toString(r.dtype) << "," << r.hidden << "," << r.tokens << "," << r.bytes;
    for (int p = 0; p < kPaths; ++p) csv << "," << r.us[p];
    csv << "," << (best >= 0 ? arfbench::pathName(paths[best]) : "-") << "," << r.pick << "," << vs_nccl << "," << vs_best << "\n";
    json << "    {\"dtype\": \"" << arfusion::toString(r.dtype) << "\", \"hidden\": " << r.hidden << ", \"tokens\": " << r.tokens
         << ", \"bytes\": " << r.bytes;
    for (int p = 0; p < kPaths; ++p) json << ", \"" << arfbench::pathName(paths[p]) << "_us\": " << (std::isnan(r.us[p]) ? -1.0 : r.us[p]);
    json << ", \"auto_pick\": \"" << r.pick << "\"}" << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  json << "  ],\n  \"auto_slower_than_nccl_path_by_3pct\": " << slower_than_nccl << ",\n  \"auto_off_fastest_by_5pct\": " << off_best << "\n}\n";
  csv.close();
  json.close();
  int errors = 0;
  for (const Row& r : rows)
    for (int p = 0; p < kPaths; ++p)
      if (!r.err[p].empty()) {
        ++errors;
        std::printf("error: %s at %lld x %lld: %s\n", arfbench::pathName(paths[p]), (long long)r.tokens, (long long)r.hidden, r.err[p].c_str());
      }
  std::printf("auto slower than the NCCL path by > 3%%: %d of %zu sizes; auto > 5%% off the fastest: %d\n", slower_than_nccl, rows.size(), off_best);
  // The plot: the installed script beside this executable, else the source tree's.
  const std::string exe = argv[0];
  const std::string beside = exe.substr(0, exe.rfind('/') + 1) + "arfusion-plot-bench";
  for (const std::string& script : {beside, std::string(ARFUSION_PLOT_SCRIPT)}) {
    if (access(script.c_str(), R_OK) == 0) {
      const std::string cmd = "python3 '" + script + "' '" + out_dir + "/results.csv' '" + out_dir + "/results.png'";
      if (std::system(cmd.c_str()) != 0) std::printf("note: no plot (it needs python3 with matplotlib)\n");
      break;
    }
  }
  std::printf("wrote %s/results.csv, results.json\n", out_dir.c_str());
  if (errors) std::printf("%d measurement(s) failed (above)\n", errors);
  return errors ? arfbench::kExitFailed : arfbench::kExitOk;
}
