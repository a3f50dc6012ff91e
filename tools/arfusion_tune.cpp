// arfusion-tune: measures one-shot, two-shot and the NCCL path on this machine's GPUs (one rank per
// GPU, threads of this process) over a sweep of message sizes, under CUDA-graph replay, each time
// the max over ranks, and writes a tuning file for ARFUSION_TUNING_FILE / Config::tuning_file.
// A fused strategy wins a size only if it beats the NCCL path by more than --margin. The file also
// gets the token count from which the two-shot won (twoShotTokenFloor), which Auto applies at
// every hidden size.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "host/communicator.h"
#include "host/auto_table.h"
#include "host/tuning_file.h"

using arfbench::Path;

int main(int argc, char** argv) {
  std::string out = "arfusion-tuning.txt";
  int64_t hidden = 8192, min_bytes = 8192, max_bytes = int64_t(256) << 20;
  int per_octave = 2;
  double margin = 0.03;
  arfusion::DType dtype = arfusion::DType::kBFloat16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--out" && has) out = argv[++i];
    else if (a == "--hidden" && has) hidden = std::atoll(argv[++i]);
    else if (a == "--min-bytes" && has) min_bytes = std::atoll(argv[++i]);
    else if (a == "--max-bytes" && has) max_bytes = std::atoll(argv[++i]);
    else if (a == "--per-octave" && has) per_octave = std::max(1, std::atoi(argv[++i]));
    else if (a == "--margin" && has) margin = std::atof(argv[++i]);
    else if (a == "--fp16") dtype = arfusion::DType::kFloat16;
    else {
      std::printf("usage: arfusion-tune [--out FILE] [--hidden H] [--fp16] [--min-bytes B] [--max-bytes B]\n"
                  "                     [--per-octave K] [--margin M]\n"
                  "  Measures every strategy on all GPUs of this machine and writes an Auto tuning file\n"
                  "  (default arfusion-tuning.txt) for ARFUSION_TUNING_FILE.\n");
      return a == "--help" ? 0 : 2;
    }
  }
  arfusion::Config cfg;
  cfg.tuning_file = nullptr;
  int exit_code = arfbench::kExitOk;
  const std::unique_ptr<arfbench::Group> group = arfbench::openAllGpus("arfusion-tune", &exit_code, cfg);
  if (!group) return exit_code;
  arfbench::Group& g = *group;
  const int n = g.world();
  const int64_t row = hidden * (dtype == arfusion::DType::kFloat32 ? 4 : 2);
  std::vector<arfusion::detail::SizeTiming> rows;
  for (double b = double(min_bytes); b <= double(max_bytes) * 1.0001; b *= std::pow(2.0, 1.0 / per_octave)) {
    const int64_t tokens = std::max<int64_t>(1, std::llround(b / row));
    if (!rows.empty() && rows.back().bytes == tokens * row) continue;
    arfusion::detail::SizeTiming m;
    m.bytes = tokens * row;
    m.tokens = tokens;
    auto us = [&](Path p) {
      const arfbench::Timing t = g.time(p, arfusion::Op::kAllReduceAddRMSNorm, dtype, tokens, hidden);
      return t.error.empty() ? t.us : std::nan("");
    };
    m.us_nccl = us(Path::kNcclPath);
    m.us_oneshot = us(Path::kOneShot);
    m.us_twoshot = us(Path::kTwoShot);
    std::printf("%10lld bytes  nccl %9.1f  oneshot %9.1f  twoshot %9.1f us\n", (long long)m.bytes, m.us_nccl, m.us_oneshot, m.us_twoshot);
    rows.push_back(m);
  }
  const auto& topo = g.comm(0)->topo;
  arfusion::detail::AutoTable table = arfusion::detail::tableFromMeasurements(rows, margin, out);
  // The rows from which the two-shot wins: a floor that also holds at other hidden sizes, where the
  // byte rules alone would put the two-shot on a few wide rows (docs/design.md, "Auto").
  table.twoshot_min_tokens = arfusion::detail::twoShotTokenFloor(rows);
  const std::string text = arfusion::detail::formatTuning(topo, table);
  std::ofstream f(out);
  f << "# measured on " << g.deviceName() << " x " << n << ", hidden " << hidden << ", " << arfusion::toString(dtype)
    << ", margin " << margin << "; twoshot-min-tokens: the token count from which the two-shot won\n" << text;
  if (!f) {
    std::fprintf(stderr, "arfusion-tune: cannot write %s\n", out.c_str());
    return 1;
  }
  std::printf("\n%s\nwrote %s (use it with ARFUSION_TUNING_FILE=%s)\n", text.c_str(), out.c_str(), out.c_str());
  return 0;
}
