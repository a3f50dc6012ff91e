// EXPERIMENT (not part of the library): hunts the stall mode. For each repetition x poll variant x
// path x shape: one graph-replay measurement (bench harness), a CSV line, and for stalled
// measurements (and the first of each combination) the per-block trace of the last call.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "bench_harness.h"

namespace arfusion::detail {
extern int g_debug_poll;
extern unsigned long long* g_trace[8];
}  // namespace arfusion::detail

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  std::vector<int> variants;
  for (const char* p = argc > 2 ? argv[2] : "0,1,2,3,4,5,6"; *p;) {
    variants.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  const std::string out = argc > 3 ? argv[3] : ".";
  const std::string paths_arg = argc > 4 ? argv[4] : "oneshot,oneshot_flag,twoshot";
  auto g = arfbench::openAllGpus("stall_hunt");
  if (!g) return 1;
  const int world = g->world();
  FILE* csv = std::fopen((out + "/measurements.csv").c_str(), "w");
  FILE* tr = std::fopen((out + "/traces.txt").c_str(), "w");
  std::fprintf(csv, "rep,variant,path,tokens,hidden,us\n");
  std::fprintf(tr, "# rep variant path tokens hidden us | rank block enter push arr_min arr_max end (ns rel. to min enter) smid polls epoch\n");
  struct Shape { int64_t t, h; };
  const std::vector<Shape> shapes = {{1, 4096}, {1, 8192}, {4, 8192}, {16, 8192}, {64, 8192}, {128, 8192}, {256, 8192}, {512, 8192}, {128, 4096}, {512, 4096}, {2048, 8192}};
  std::vector<std::pair<arfbench::Path, std::string>> paths;
  if (paths_arg.find("oneshot_flag") != std::string::npos) paths.push_back({arfbench::Path::kOneShotFlag, "oneshot_flag"});
  if (paths_arg.find("oneshot,") != std::string::npos || paths_arg == "oneshot") paths.push_back({arfbench::Path::kOneShot, "oneshot"});
  if (paths_arg.find("twoshot") != std::string::npos) paths.push_back({arfbench::Path::kTwoShot, "twoshot"});
  std::map<std::string, double> min_us;
  std::map<std::string, int> stalls, total;
  int max_blocks = 132;
  std::vector<unsigned long long> host;
  for (int rep = 0; rep < reps; ++rep) {
    for (int v : variants) {
      arfusion::detail::g_debug_poll = v;
      for (auto& [path, pname] : paths) {
        for (auto s : shapes) {
          const arfbench::Timing t = g->time(path, arfusion::Op::kAllReduceAddRMSNorm, arfusion::DType::kBFloat16, s.t, s.h);
          if (!t.error.empty()) {
            std::printf("error %s %lld %lld: %s\n", pname.c_str(), (long long)s.t, (long long)s.h, t.error.c_str());
            return 1;
          }
          std::fprintf(csv, "%d,%d,%s,%lld,%lld,%.2f\n", rep, v, pname.c_str(), (long long)s.t, (long long)s.h, t.us);
          std::fflush(csv);
          const std::string key = pname + "/" + std::to_string(s.t) + "/" + std::to_string(s.h);
          const std::string vkey = key + "/v" + std::to_string(v);
          auto it = min_us.find(key);
          const bool first = total[vkey] == 0;
          if (it == min_us.end() || t.us < it->second) min_us[key] = t.us;
          const bool stalled = t.us > 2.5 * min_us[key] && t.us > min_us[key] + 20;
          total[vkey]++;
          if (stalled) stalls[vkey]++;
          std::printf("rep %d v%d %-13s %4lld x %5lld %9.1f us%s\n", rep, v, pname.c_str(), (long long)s.t, (long long)s.h, t.us, stalled ? "  STALL" : "");
          std::fflush(stdout);
          if (!(stalled || first) || !arfusion::detail::g_trace[0]) continue;
          // Last call's record per block: the slot with the highest epoch.
          std::vector<std::vector<unsigned long long>> recs;
          unsigned long long base = ~0ull;
          for (int r = 0; r < world; ++r) {
            host.assign(size_t(64) * max_blocks * 8, 0);
            cudaSetDevice(r);
            cudaMemcpy(host.data(), arfusion::detail::g_trace[r], host.size() * 8, cudaMemcpyDeviceToHost);
            for (int b = 0; b < max_blocks; ++b) {
              const unsigned long long* best = nullptr;
              for (int e = 0; e < 64; ++e) {
                const unsigned long long* x = &host[(size_t(e) * max_blocks + b) * 8];
                if (x[0] && (!best || int32_t(uint32_t(x[6]) - uint32_t(best[6])) > 0)) best = x;
              }
              if (!best) continue;
              recs.emplace_back(best, best + 8);
              base = std::min(base, best[0]);
            }
          }
          // Only blocks whose last record belongs to this measurement (within 50 ms of the latest end).
          unsigned long long last_end = 0;
          for (auto& x : recs) last_end = std::max(last_end, x[4]);
          for (auto& x : recs) {
            if (x[4] + 50000000ull < last_end) continue;
            auto rel = [&](unsigned long long a) { return a == ~0ull ? -1.0 : double((long long)(a - base)) / 1000.0; };
            std::fprintf(tr, "%d %d %s %lld %lld %.1f%s | %llu %llu %.2f %.2f %.2f %.2f %.2f %llu %llu %llu\n", rep, v, pname.c_str(),
                         (long long)s.t, (long long)s.h, t.us, stalled ? " STALL" : "", x[7] >> 32, x[7] & 0xffffffffull, rel(x[0]),
                         rel(x[1]), rel(x[2]), rel(x[3]), rel(x[4]), x[5] & 0xffffffffull, x[5] >> 32, x[6]);
          }
          std::fflush(tr);
        }
      }
    }
  }
  std::printf("\nstalls per variant (stalled / measured, over all shapes of a path):\n");
  std::map<std::string, std::pair<int, int>> agg;
  for (auto& [k, n] : total) {
    const std::string path = k.substr(0, k.find('/'));
    const std::string v = k.substr(k.rfind('/') + 1);
    agg[path + " " + v].first += stalls[k];
    agg[path + " " + v].second += n;
  }
  for (auto& [k, p] : agg) std::printf("  %-20s %d / %d\n", k.c_str(), p.first, p.second);
  std::fclose(csv);
  std::fclose(tr);
  return 0;
}
