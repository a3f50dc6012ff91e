// The tuning-file format (written by arfusion-tune, read by commCreate): one rule per line,
//
//   arfusion-tuning 1
//   arch 9.0                       # the compute capability it was measured on
//   link nvlink                    # single-rank | same-device | nvlink | pcie
//   world 2
//   rule 524288 oneshot            # messages up to 524288 bytes: the one-shot
//   rule max twoshot               # the last rule covers every size
//   twoshot-min-tokens 133         # optional: the two-shot only from 133 tokens on
//
// '#' starts a comment. A file measured for another arch, link or world size is rejected.
#include "tuning_file.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "errors.h"
#include "names.h"

namespace arfusion::detail {

std::string formatTuning(const Topology& t, const AutoTable& table) {
  std::ostringstream os;
  os << "# arfusion tuning file: written by tools/arfusion-tune; one rule per line,\n"
     << "# the first rule with max_bytes >= the message size (tokens*hidden*elem) applies.\n"
     << "arfusion-tuning 1\n"
     << "arch " << t.cc_major << "." << t.cc_minor << "\n"
     << "link " << toString(t.link) << "\n"
     << "world " << t.world << "\n";
  for (const Rule& r : table.rules) {
    os << "rule ";
    if (r.max_bytes == kAllSizes) os << "max"; else os << r.max_bytes;
    os << " " << toString(r.strategy) << "\n";
  }
  if (table.twoshot_min_tokens > 0) os << "twoshot-min-tokens " << table.twoshot_min_tokens << "\n";
  return os.str();
}

Status parseTuning(const std::string& text, const std::string& source, const Topology& t, AutoTable* out) {
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  bool header = false, arch = false, link = false, world = false;
  AutoTable table;
  auto bad = [&](const std::string& why) {
    return failf(Status::kInvalidArgument, "tuning file %s, line %d: %s", source.c_str(), lineno, why.c_str());
  };
  while (std::getline(in, line)) {
    ++lineno;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    std::string key;
    if (!(ls >> key)) continue;
    std::string extra;
    if (key == "arfusion-tuning") {
      int v = 0;
      if (!(ls >> v) || v != 1) return bad("unsupported version (expected 'arfusion-tuning 1')");
      header = true;
    } else if (!header) {
      return bad("first line must be 'arfusion-tuning 1'");
    } else if (key == "arch") {
      std::string v;
      ls >> v;
      char want[16];
      std::snprintf(want, sizeof want, "%d.%d", t.cc_major, t.cc_minor);
      if (v != want) return bad("measured on arch " + v + ", this machine is " + want);
      arch = true;
    } else if (key == "link") {
      std::string v;
      ls >> v;
      if (v != toString(t.link)) return bad("measured over link " + v + ", this group uses " + toString(t.link));
      link = true;
    } else if (key == "world") {
      int w = 0;
      if (!(ls >> w) || w != t.world) return bad("measured for another world size (this group has " + std::to_string(t.world) + ")");
      world = true;
    } else if (key == "twoshot-min-tokens") {
      long long v = -1;
      if (!(ls >> v) || v < 0) return bad("expected 'twoshot-min-tokens <tokens >= 0>'");
      table.twoshot_min_tokens = v;
    } else if (key == "rule") {
      std::string size, strat;
      if (!(ls >> size >> strat)) return bad("expected 'rule <max_bytes|max> <oneshot|twoshot|nccl>'");
      Rule r{};
      if (size == "max") {
        r.max_bytes = kAllSizes;
      } else {
        char* end = nullptr;
        const long long v = std::strtoll(size.c_str(), &end, 10);
        if (*end != '\0' || v <= 0) return bad("max_bytes '" + size + "' is not a positive integer");
        r.max_bytes = v;
      }
      if (!parseStrategy(strat.c_str(), &r.strategy) || r.strategy == Strategy::kAuto)
        return bad("strategy '" + strat + "' is not oneshot|twoshot|nccl");
      if (!table.rules.empty() && r.max_bytes <= table.rules.back().max_bytes)
        return bad("rules must have increasing max_bytes");
      table.rules.push_back(r);
    } else {
      return bad("unknown key '" + key + "'");
    }
    if (ls >> extra) return bad("unexpected '" + extra + "'");
  }
  if (!header) return failf(Status::kInvalidArgument, "tuning file %s: empty or not a tuning file", source.c_str());
  if (!arch || !link || !world)
    return failf(Status::kInvalidArgument, "tuning file %s: needs 'arch', 'link' and 'world' lines", source.c_str());
  if (table.rules.empty() || table.rules.back().max_bytes != kAllSizes)
    return failf(Status::kInvalidArgument, "tuning file %s: the last rule must be 'rule max ...'", source.c_str());
  table.source = source;
  table.measured = true;
  *out = std::move(table);
  return Status::kSuccess;
}

Status loadTuningFile(const char* path, const Topology& t, AutoTable* out) {
  std::ifstream f(path);
  if (!f) return failf(Status::kInvalidArgument, "tuning file %s: cannot be opened", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parseTuning(ss.str(), path, t, out);
}

}  // namespace arfusion::detail
