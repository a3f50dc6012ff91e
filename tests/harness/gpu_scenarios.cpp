#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "gpu_harness.h"
#include "quant_ref.h"
#include "reference.h"

using arfusion::DType;
using arfusion::Op;
using arfusion::Status;
using arfusion::Strategy;
using arfusion::SyncMode;

namespace arftest {
namespace {

#define CK(expr)                                                                          \
  do {                                                                                    \
    const cudaError_t e_ = (expr);                                                        \
    if (e_ != cudaSuccess) return std::string(#expr) + ": " + cudaGetErrorString(e_);    \
  } while (0)

#define OK(expr)                                                                                      \
  do {                                                                                                \
    const Status s_ = (expr);                                                                         \
    if (s_ != Status::kSuccess)                                                                       \
      return std::string(#expr) + " -> " + arfusion::statusString(s_) + ": " + arfusion::lastError(); \
  } while (0)

// Stream-ordered device buffer: no implicit device-wide sync on allocation or free, which would
// deadlock ranks that share a GPU (one rank's cudaFree waiting for a peer's kernel that waits for
// this rank).
struct DevBuf {
  void* base = nullptr;
  void* p = nullptr;
  size_t bytes = 0;
  cudaStream_t stream = nullptr;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  ~DevBuf() {
    if (base) cudaFreeAsync(base, stream);
  }
  std::string alloc(size_t n, cudaStream_t s, size_t offset = 0) {
    bytes = n;
    stream = s;
    CK(cudaMallocAsync(&base, n + 32, s));
    p = static_cast<char*>(base) + offset;
    return "";
  }
  std::string upload(const void* host, size_t n) {
    CK(cudaMemcpyAsync(p, host, n, cudaMemcpyHostToDevice, stream));
    CK(cudaStreamSynchronize(stream));
    return "";
  }
};

Status callOp(RankCtx& ctx, Op op, const DevBuf& in, const DevBuf& res_in, DevBuf& res_out, const DevBuf& gamma,
              DevBuf& out, int64_t T, int64_t H, DType d, float eps) {
  switch (op) {
    case Op::kAllReduce: return arfusion::allReduce(ctx.comm, in.p, out.p, T, H, d, ctx.stream);
    case Op::kAllReduceAdd: return arfusion::allReduceAdd(ctx.comm, in.p, res_in.p, res_out.p, T, H, d, ctx.stream);
    case Op::kAllReduceAddRMSNorm:
      return arfusion::allReduceAddRMSNorm(ctx.comm, in.p, res_in.p, res_out.p, gamma.p, out.p, T, H, d, eps, ctx.stream);
  }
  return Status::kInternalError;
}

std::vector<uint8_t> download(const DevBuf& b) {
  std::vector<uint8_t> h(b.bytes);
  cudaMemcpyAsync(h.data(), b.p, b.bytes, cudaMemcpyDeviceToHost, b.stream);
  cudaStreamSynchronize(b.stream);
  return h;
}

struct Variant {
  Strategy strategy;
  SyncMode sync;
};

// Every path a group can run: the NCCL path first where there is one (the bitwise reference at 2
// ranks), then each fused strategy x sync mode.
std::vector<Variant> pathVariants(const RankCtx& ctx) {
  std::vector<Variant> v;
  if (ctx.nccl) v.push_back({Strategy::kNccl, SyncMode::kAuto});
  if (ctx.world > 1) {
    for (Strategy s : {Strategy::kOneShot, Strategy::kTwoShot})
      for (SyncMode m : {SyncMode::kGridDependency, SyncMode::kFlagBarrier}) v.push_back({s, m});
  }
  return v;
}

std::string describe(const ShapeCase& c, Op op, const Variant& v) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "[%s %s tokens=%lld hidden=%lld %s/%s%s%s] ", arfusion::toString(c.dtype),
                arfusion::toString(op), (long long)c.tokens, (long long)c.hidden, arfusion::toString(v.strategy),
                arfusion::toString(v.sync), c.misalign ? " misaligned" : "", c.negzero ? " -0.0" : "");
  return buf;
}

void record(const ShapeCase& c, const RankCtx& ctx, int which, const CheckResult& cr) {
  if (!c.stats || ctx.rank != 0) return;
  c.stats->max_abs[which] = std::max(c.stats->max_abs[which], cr.max_abs_err);
  c.stats->max_ulp[which] = std::max(c.stats->max_ulp[which], cr.max_ulp);
  if (which != 0) ++c.stats->paths;
}

}  // namespace

std::string agreeStep(RankCtx& ctx, const std::string& local, uint64_t h) {
  struct Vote {
    uint64_t hash;
    int32_t failed;
    int32_t pad;
  };
  Vote mine{h, local.empty() ? 0 : 1, 0};
  std::vector<Vote> all(ctx.world);
  ctx.allGather(&mine, all.data(), sizeof mine);
  if (!local.empty()) return local;
  for (int r = 0; r < ctx.world; ++r)
    if (all[r].failed) return "stopped: rank " + std::to_string(r) + " failed";
  for (int r = 1; r < ctx.world; ++r)
    if (all[r].hash != all[0].hash) return "outputs differ between rank 0 and rank " + std::to_string(r);
  return "";
}

std::string scenarioShape(RankCtx& ctx, const ShapeCase& c) {
  const DType d = c.dtype;
  const size_t E = elemSize(d), n = static_cast<size_t>(c.tokens * c.hidden), bytes = n * E;
  const float eps = 1e-5f;
  std::vector<std::vector<uint8_t>> inputs(ctx.world);
  for (int r = 0; r < ctx.world; ++r) inputs[r] = randomTensor(n, d, c.seed * 64 + r, c.scale, c.negzero);
  const auto residual = randomTensor(n, d, c.seed * 64 + 40, c.scale, c.negzero);
  const auto gamma = randomTensor(c.hidden, d, c.seed * 64 + 41);
  const Reference ref = reference(inputs, residual, gamma, c.tokens, c.hidden, d, eps);

  const size_t off = c.misalign ? E : 0;
  DevBuf in, res_in, res_out, g, out;
  std::string err;
  const cudaStream_t st = ctx.stream;
  if (!(err = in.alloc(bytes, st, off)).empty() || !(err = res_in.alloc(bytes, st, off)).empty() ||
      !(err = res_out.alloc(bytes, st, off)).empty() || !(err = g.alloc(c.hidden * E, st, off)).empty() ||
      !(err = out.alloc(bytes, st, off)).empty())
    return err;
  if (!(err = in.upload(inputs[ctx.rank].data(), bytes)).empty() || !(err = res_in.upload(residual.data(), bytes)).empty() ||
      !(err = g.upload(gamma.data(), c.hidden * E)).empty())
    return err;

  std::vector<Variant> variants = pathVariants(ctx);
  variants.push_back({Strategy::kAuto, SyncMode::kAuto});
  std::vector<Op> ops = {Op::kAllReduceAddRMSNorm};
  if (c.all_ops) ops = {Op::kAllReduceAddRMSNorm, Op::kAllReduceAdd, Op::kAllReduce};

  int fused_ran = 0;  // forced fused variants that ran: a group of 2+ ranks must run some
  for (Op op : ops) {
    std::vector<uint8_t> nccl_res, nccl_out;
    for (const Variant& v : variants) {
      const std::string what = describe(c, op, v);
      std::vector<uint8_t> got_res, got_out;
      uint64_t h = 0;
      // A forced strategy that cannot run this shape (row wider than a workspace region) is
      // refused by plan() with kNotSupported on every rank alike: nothing to run. Any other
      // refusal (fusion unavailable in this group) is a failure, not a pass without fused calls.
      // A GridDependency the creation-time self-check did not vouch for is refused on every rank
      // alike (tests/gpu/test_checks.cpp tests the refusal): nothing to run.
      const Status set = arfusion::commSetStrategy(ctx.comm, v.strategy, v.sync);
      if (set == Status::kNotSupported && v.sync == SyncMode::kGridDependency) continue;
      OK(set);
      arfusion::Plan pl;
      if (arfusion::plan(ctx.comm, arfusion::Shape{c.tokens, c.hidden, d, op}, &pl) == Status::kNotSupported) {
        const std::string why = arfusion::lastError();
        if (why.find("cannot run this shape") == std::string::npos) return what + "plan refused: " + why;
        continue;
      }
      if (v.strategy == Strategy::kOneShot || v.strategy == Strategy::kTwoShot) ++fused_ran;
      const std::string local = [&]() -> std::string {
        // Stream-ordered poison: no device-wide sync, which would deadlock ranks sharing a GPU.
        CK(cudaMemsetAsync(res_out.p, 0xff, bytes, ctx.stream));
        CK(cudaMemsetAsync(out.p, 0xff, bytes, ctx.stream));
        const Status st = callOp(ctx, op, in, res_in, res_out, g, out, c.tokens, c.hidden, d, eps);
        if (st != Status::kSuccess) return arfusion::statusString(st) + std::string(": ") + arfusion::lastError();
        CK(cudaStreamSynchronize(ctx.stream));
        const char* detail = nullptr;
        if (arfusion::commGetAsyncError(ctx.comm, &detail) != Status::kSuccess) return detail;
        if (op != Op::kAllReduce) {
          got_res = download(res_out);
          const CheckResult cr = check(got_res, ref, gamma, c.tokens, c.hidden, d, 1);
          record(c, ctx, 1, cr);
          if (!cr.ok()) return "residual_out: " + std::to_string(cr.bad) + " wrong, " + std::to_string(cr.unwritten) + " unwritten; " + cr.first;
          h = hashBytes(got_res.data(), got_res.size());
        }
        if (op != Op::kAllReduceAdd) {
          got_out = download(out);
          const CheckResult cr = check(got_out, ref, gamma, c.tokens, c.hidden, d, op == Op::kAllReduce ? 0 : 2);
          record(c, ctx, op == Op::kAllReduce ? 0 : 2, cr);
          if (!cr.ok()) return std::string(op == Op::kAllReduce ? "out: " : "norm_out: ") + std::to_string(cr.bad) + " wrong, " + std::to_string(cr.unwritten) + " unwritten; " + cr.first;
          h = hashBytes(got_out.data(), got_out.size(), h);
        }
        if (v.strategy != Strategy::kNccl && ctx.world == 2 && ctx.nccl) {
          // At 2 ranks every path computes the same fp32 sum, rounds it once, and runs the same
          // epilogue: bit-for-bit agreement with the NCCL path.
          if (got_res != nccl_res) return "residual_out differs from the NCCL path";
          if (got_out != nccl_out) return "output differs from the NCCL path";
        }
        return "";
      }();
      const std::string verdict = agreeStep(ctx, local, h);
      if (!verdict.empty()) return what + verdict;
      if (v.strategy == Strategy::kNccl) {
        nccl_res = got_res;
        nccl_out = got_out;
      }
    }
  }
  OK(arfusion::commSetStrategy(ctx.comm, Strategy::kAuto, SyncMode::kAuto));
  if (ctx.world > 1 && fused_ran == 0) return describe(c, ops[0], variants[0]) + "no fused strategy could run this shape";
  return "";
}

namespace {

// Bit patterns of the special values in dtype d.
uint32_t allOnes(DType d) { return d == DType::kFloat32 ? 0xffffffffu : 0xffffu; }
uint32_t bitsAt(const std::vector<uint8_t>& v, size_t i, DType d) {
  uint32_t x = 0;
  std::memcpy(&x, v.data() + i * elemSize(d), elemSize(d));
  return x;
}
void setBits(std::vector<uint8_t>& v, size_t i, DType d, uint32_t x) { std::memcpy(v.data() + i * elemSize(d), &x, elemSize(d)); }

}  // namespace

bool isNaNBits(uint32_t x, DType d) {
  switch (d) {
    case DType::kFloat32: return (x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu) != 0;
    case DType::kFloat16: return (x & 0x7c00u) == 0x7c00u && (x & 0x3ffu) != 0;
    case DType::kBFloat16: return (x & 0x7f80u) == 0x7f80u && (x & 0x7fu) != 0;
  }
  return false;
}

std::string scenarioSpecialValues(RankCtx& ctx) {
  // Per element class k = column % 8 (row 0 only, other rows random):
  //   0 NaN on rank 0            -> NaN        1 all-ones NaN on the last rank -> NaN
  //   2 +Inf on rank 0           -> +Inf       3 -Inf on every rank          -> -Inf
  //   4 +Inf rank 0, -Inf last   -> NaN        5 -0.0 on every rank          -> -0.0 (bits)
  //   6 largest finite everywhere-> +Inf (overflow, fp32 accumulation too)  7 random
  // kAllReduce's out and kAllReduceAddRMSNorm's residual_out (residual + sum: the same classes,
  // but class 5 gives the residual's bits) are checked against these classes on every path;
  // norm_out (whole rows become NaN) against the NCCL path at 2 ranks, NaN matching any NaN, and
  // across paths, as is residual_out. Outputs are poisoned with 0x55 bytes (a finite value no
  // output can take here).
  for (DType d : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (int64_t H : {int64_t(4096), int64_t(1001)}) {  // vector and scalar paths
      const int64_t T = 3;
      const size_t E = elemSize(d), n = static_cast<size_t>(T * H), bytes = n * E;
      const uint32_t pos_inf = d == DType::kFloat32 ? 0x7f800000u : d == DType::kFloat16 ? 0x7c00u : 0x7f80u;
      const uint32_t neg_inf = d == DType::kFloat32 ? 0xff800000u : d == DType::kFloat16 ? 0xfc00u : 0xff80u;
      const uint32_t nan = d == DType::kFloat32 ? 0x7fc00000u : d == DType::kFloat16 ? 0x7e00u : 0x7fc0u;
      const uint32_t negz = d == DType::kFloat32 ? 0x80000000u : 0x8000u;
      const uint32_t maxf = d == DType::kFloat32 ? 0x7f7fffffu : d == DType::kFloat16 ? 0x7bffu : 0x7f7fu;
      std::vector<uint8_t> input = randomTensor(n, d, 900 + ctx.rank * 7 + E + H);
      for (int64_t h = 0; h < H; ++h) {
        const int k = static_cast<int>(h % 8);
        const bool first = ctx.rank == 0, last = ctx.rank == ctx.world - 1;
        if (k == 0 && first) setBits(input, h, d, nan);
        if (k == 1 && last) setBits(input, h, d, allOnes(d));
        if (k == 2 && first) setBits(input, h, d, pos_inf);
        if (k == 3) setBits(input, h, d, neg_inf);
        if (k == 4) setBits(input, h, d, first ? pos_inf : last ? neg_inf : 0);
        if (k == 5) setBits(input, h, d, negz);
        if (k == 6) setBits(input, h, d, maxf);
      }
      const auto residual = randomTensor(n, d, 950 + E + H);
      const auto gamma = randomTensor(H, d, 951 + E + H);
      DevBuf in, res_in, res_out, g, out;
      std::string err;
      const cudaStream_t st = ctx.stream;
      for (DevBuf* b : {&in, &res_in, &res_out, &out})
        if (!(err = b->alloc(bytes, st)).empty()) return err;
      if (!(err = g.alloc(H * E, st)).empty()) return err;
      if (!(err = in.upload(input.data(), bytes)).empty() || !(err = res_in.upload(residual.data(), bytes)).empty() ||
          !(err = g.upload(gamma.data(), H * E)).empty())
        return err;
      const std::vector<Variant> variants = pathVariants(ctx);
      for (Op op : {Op::kAllReduce, Op::kAllReduceAddRMSNorm}) {
        std::vector<uint8_t> first_out, first_res;
        for (const Variant& v : variants) {
          ShapeCase sc{d, T, H, 0};
          const std::string what = describe(sc, op, v) + "special values: ";
          const Status set = arfusion::commSetStrategy(ctx.comm, v.strategy, v.sync);
          if (set == Status::kNotSupported && v.sync == SyncMode::kGridDependency) continue;  // as scenarioShape
          OK(set);
          std::vector<uint8_t> got, got_res;
          const std::string local = [&]() -> std::string {
            CK(cudaMemsetAsync(res_out.p, 0x55, bytes, st));
            CK(cudaMemsetAsync(out.p, 0x55, bytes, st));
            const Status s = callOp(ctx, op, in, res_in, res_out, g, out, T, H, d, 1e-5f);
            if (s != Status::kSuccess) return arfusion::statusString(s) + std::string(": ") + arfusion::lastError();
            CK(cudaStreamSynchronize(st));
            const char* detail = nullptr;
            if (arfusion::commGetAsyncError(ctx.comm, &detail) != Status::kSuccess) return detail;
            const uint32_t poison = d == DType::kFloat32 ? 0x55555555u : 0x5555u;
            // Row 0's classes in `v` (sum: out of kAllReduce; with_residual: residual_out).
            auto checkClasses = [&](const std::vector<uint8_t>& v, bool with_residual, const char* name) -> std::string {
              for (int64_t h = 0; h < H; ++h) {
                const uint32_t x = bitsAt(v, h, d);
                const int k = static_cast<int>(h % 8);
                bool ok = true;
                if (k == 0 || k == 1 || k == 4) ok = isNaNBits(x, d);
                if (k == 2 || k == 6) ok = x == pos_inf;
                if (k == 3) ok = x == neg_inf;
                if (k == 5) ok = x == (with_residual ? bitsAt(residual, h, d) : negz);
                if (!ok) {
                  char buf[140];
                  std::snprintf(buf, sizeof buf, "%s column %lld (class %d): got bits 0x%x", name, (long long)h, k, x);
                  return buf;
                }
              }
              return "";
            };
            // Bit for bit, but any NaN matches any NaN.
            auto sameAs = [&](const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, const char* name) -> std::string {
              for (size_t i = 0; i < n; ++i) {
                const uint32_t x = bitsAt(a, i, d), y = bitsAt(b, i, d);
                if (x != y && !(isNaNBits(x, d) && isNaNBits(y, d))) {
                  char buf[160];
                  std::snprintf(buf, sizeof buf, "%s element %zu: 0x%x, but the %s path gave 0x%x", name, i, x,
                                ctx.nccl ? "NCCL" : "first fused", y);
                  return buf;
                }
              }
              return "";
            };
            got = download(out);
            for (size_t i = 0; i < n; ++i)
              if (bitsAt(got, i, d) == poison) return "element " + std::to_string(i) + " unwritten";
            if (op == Op::kAllReduce) {
              if (std::string e = checkClasses(got, false, "out"); !e.empty()) return e;
            } else {
              got_res = download(res_out);
              for (size_t i = 0; i < n; ++i)
                if (bitsAt(got_res, i, d) == poison) return "residual_out element " + std::to_string(i) + " unwritten";
              if (std::string e = checkClasses(got_res, true, "residual_out"); !e.empty()) return e;
              if (!first_res.empty())
                if (std::string e = sameAs(got_res, first_res, "residual_out"); !e.empty()) return e;
            }
            if (!first_out.empty())
              if (std::string e = sameAs(got, first_out, "output"); !e.empty()) return e;
            return "";
          }();
          // Ranks must agree: hash with every NaN mapped to one pattern (payloads may differ).
          std::vector<uint8_t> canon = got;
          for (size_t i = 0; i < canon.size() / E; ++i)
            if (isNaNBits(bitsAt(canon, i, d), d)) setBits(canon, i, d, nan);
          const std::string verdict = agreeStep(ctx, local, hashBytes(canon.data(), canon.size()));
          if (!verdict.empty()) return what + verdict;
          if (first_out.empty()) first_out = got, first_res = got_res;
        }
      }
    }
  }
  OK(arfusion::commSetStrategy(ctx.comm, Strategy::kAuto, SyncMode::kAuto));
  return "";
}

std::string scenarioSoak(RankCtx& ctx, int64_t calls, uint64_t seed, int64_t* compared, unsigned long long* mismatches) {
  // One round: 32 calls whose token count, hidden size (vector and scalar paths) and dtype change
  // every call.
  struct Call {
    int64_t T, H;
    DType d;
  };
  constexpr DType bf = DType::kBFloat16, h16 = DType::kFloat16, f32 = DType::kFloat32;
  static const Call kSeq[] = {{1, 4096, bf},  {128, 4096, bf}, {3, 8192, h16},  {64, 2880, f32},  {17, 4096, bf},
                              {256, 8192, bf}, {2, 1004, h16},  {300, 4096, bf}, {5, 5120, f32},   {512, 2048, h16},
                              {33, 8192, bf},  {129, 1002, f32}, {7, 4096, h16}, {96, 4096, bf},   {1, 8192, f32},
                              {200, 2880, bf}, {4, 4096, bf},   {64, 8192, h16}, {511, 1024, bf},  {8, 1004, bf},
                              {16, 16384, bf}, {1, 2048, h16},  {48, 4096, f32}, {255, 4096, bf},  {9, 8192, bf},
                              {128, 5120, h16}, {2, 4096, f32}, {384, 4096, bf}, {31, 2880, h16},  {1, 1004, bf},
                              {77, 8192, bf},  {160, 4096, h16}};
  constexpr int kSeqLen = static_cast<int>(sizeof kSeq / sizeof kSeq[0]);
  const size_t max_elems = size_t(512) * 8192;
  const int64_t max_h = 16384;
  const bool nccl_ref = ctx.nccl && ctx.world == 2;
  DevBuf res_f, out_f, res_r, out_r, counter;
  DevBuf in[3], res_in[3], g[3];  // per dtype (bf16, fp16, fp32)
  std::string err;
  for (DevBuf* b : {&res_f, &out_f, &res_r, &out_r})
    if (!(err = b->alloc(max_elems * 4, ctx.stream)).empty()) return err;
  if (!(err = counter.alloc(8, ctx.stream)).empty()) return err;
  for (int t = 0; t < 3; ++t) {
    const DType d = t == 0 ? bf : t == 1 ? h16 : f32;
    const size_t es = d == f32 ? 4 : 2;
    const auto hin = randomTensor(max_elems, d, seed * 97 + ctx.rank + 10 * t);
    const auto hres = randomTensor(max_elems, d, seed * 97 + 50 + t);
    const auto hg = randomTensor(max_h, d, seed * 97 + 60 + t);
    if (!(err = in[t].alloc(max_elems * es, ctx.stream)).empty() || !(err = res_in[t].alloc(max_elems * es, ctx.stream)).empty() ||
        !(err = g[t].alloc(max_h * es, ctx.stream)).empty())
      return err;
    if (!(err = in[t].upload(hin.data(), max_elems * es)).empty() || !(err = res_in[t].upload(hres.data(), max_elems * es)).empty() ||
        !(err = g[t].upload(hg.data(), max_h * es)).empty())
      return err;
  }
  CK(cudaMemsetAsync(counter.p, 0, 8, ctx.stream));

  // A GridDependency the creation-time self-check did not vouch for is refused on every rank alike
  // (as in scenarioShape): those calls take the flag barrier.
  auto setStrategy = [&](Strategy s, SyncMode m) {
    const Status st = arfusion::commSetStrategy(ctx.comm, s, m);
    return st == Status::kNotSupported && m == SyncMode::kGridDependency
               ? arfusion::commSetStrategy(ctx.comm, s, SyncMode::kFlagBarrier) : st;
  };
  // One compared pair of calls; *fused: the first call ran a fused kernel (Auto may plan the NCCL
  // path, and NCCL against NCCL compares nothing fused). Outputs are poisoned with different bytes
  // for the two calls, so an element that neither call writes is a mismatch.
  auto body = [&](int k, bool* fused_call) -> std::string {
    const Call& c = kSeq[k];
    const int t = c.d == bf ? 0 : c.d == h16 ? 1 : 2;
    const size_t bytes = size_t(c.T * c.H) * (c.d == f32 ? 4 : 2);
    const Strategy fused = k % 3 == 0 ? Strategy::kOneShot : k % 3 == 1 ? Strategy::kTwoShot : (nccl_ref ? Strategy::kAuto : Strategy::kOneShot);
    const Strategy refs = nccl_ref ? Strategy::kNccl : (fused == Strategy::kOneShot ? Strategy::kTwoShot : Strategy::kOneShot);
    const SyncMode sync = k % 2 ? SyncMode::kFlagBarrier : SyncMode::kGridDependency;
    CK(perturb(in[t].p, bytes, ctx.stream));
    CK(cudaMemsetAsync(res_f.p, 0xff, bytes, ctx.stream));
    CK(cudaMemsetAsync(out_f.p, 0xff, bytes, ctx.stream));
    CK(cudaMemsetAsync(res_r.p, 0xfe, bytes, ctx.stream));
    CK(cudaMemsetAsync(out_r.p, 0xfe, bytes, ctx.stream));
    OK(setStrategy(fused, sync));
    *fused_call = true;
    if (fused == Strategy::kAuto) {  // the only choice that may resolve to the NCCL path
      arfusion::Plan pl;
      OK(arfusion::plan(ctx.comm, arfusion::Shape{c.T, c.H, c.d}, &pl));
      *fused_call = pl.strategy != Strategy::kNccl;
    }
    OK(arfusion::allReduceAddRMSNorm(ctx.comm, in[t].p, res_in[t].p, res_f.p, g[t].p, out_f.p, c.T, c.H, c.d, 1e-6f, ctx.stream));
    OK(setStrategy(refs, k % 4 < 2 ? SyncMode::kFlagBarrier : SyncMode::kGridDependency));
    OK(arfusion::allReduceAddRMSNorm(ctx.comm, in[t].p, res_in[t].p, res_r.p, g[t].p, out_r.p, c.T, c.H, c.d, 1e-6f, ctx.stream));
    // A failed compare launch would leave the counter at 0: checked.
    CK(countMismatch(res_f.p, res_r.p, bytes, static_cast<unsigned long long*>(counter.p), ctx.stream));
    CK(countMismatch(out_f.p, out_r.p, bytes, static_cast<unsigned long long*>(counter.p), ctx.stream));
    return "";
  };

  const int64_t rounds = (calls + kSeqLen - 1) / kSeqLen;
  const int64_t eager_rounds = rounds / 8 + 1;
  *compared = 0;
  // The eager rounds, then the graph, each phase ending in a host barrier that carries every
  // rank's error (agreeStep), so that a rank that fails leaves no peer waiting in the next one.
  // Staged so: every rank's eager calls have finished before any rank captures and instantiates,
  // and every rank's graph is instantiated and uploaded before any rank launches it. On one H200
  // with 3-8 ranks sharing the GPU, instantiating this graph (it has memset nodes) waited for the
  // kernels already running there, i.e. for peers' calls spinning for this very rank, until their
  // timeout.
  auto eager = [&]() -> std::string {
    for (int64_t r = 0; r < eager_rounds; ++r) {
      for (int k = 0; k < kSeqLen; ++k) {
        bool fused_call = false;
        if (std::string e = body(k, &fused_call); !e.empty()) return "eager: " + e;
        *compared += fused_call;
      }
    }
    CK(cudaStreamSynchronize(ctx.stream));
    return "";
  };
  if (std::string v = agreeStep(ctx, eager(), 0); !v.empty()) return v;
  struct Graph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ~Graph() {
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
    }
  } graph;
  int64_t fused_per_round = 0;
  auto prepare = [&]() -> std::string {
    CK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < kSeqLen; ++k) {
      bool fused_call = false;
      if (std::string e = body(k, &fused_call); !e.empty()) {
        cudaStreamEndCapture(ctx.stream, &graph.graph);
        return "capture: " + e;
      }
      fused_per_round += fused_call;
    }
    CK(cudaStreamEndCapture(ctx.stream, &graph.graph));
    CK(cudaGraphInstantiate(&graph.exec, graph.graph, 0));
    CK(cudaGraphUpload(graph.exec, ctx.stream));
    CK(cudaStreamSynchronize(ctx.stream));
    return "";
  };
  if (std::string v = agreeStep(ctx, prepare(), 0); !v.empty()) return v;
  for (int64_t r = eager_rounds; r < rounds; ++r) {
    CK(cudaGraphLaunch(graph.exec, ctx.stream));
    *compared += fused_per_round;
  }
  CK(cudaStreamSynchronize(ctx.stream));
  const char* detail = nullptr;
  if (arfusion::commGetAsyncError(ctx.comm, &detail) != Status::kSuccess) return std::string("device error: ") + detail;
  CK(cudaMemcpyAsync(mismatches, counter.p, 8, cudaMemcpyDeviceToHost, ctx.stream));
  CK(cudaStreamSynchronize(ctx.stream));
  OK(arfusion::commSetStrategy(ctx.comm, Strategy::kAuto, SyncMode::kAuto));
  if (*mismatches) return std::to_string(*mismatches) + " mismatching words over " + std::to_string(*compared) + " calls";
  if (*compared < calls / 2) return "only " + std::to_string(*compared) + " of " + std::to_string(calls) + " calls ran fused";
  return "";
}

std::string scenarioTwoStreams(RankCtx& ctx) {
  const DType d = DType::kBFloat16;
  const int64_t T = 64, H = 4096;
  const size_t n = T * H, bytes = n * 2;
  const int kCalls = 64;
  std::vector<std::vector<uint8_t>> inputs(ctx.world);
  for (int r = 0; r < ctx.world; ++r) inputs[r] = randomTensor(n, d, 7000 + r);
  const auto residual = randomTensor(n, d, 7100), gamma = randomTensor(H, d, 7101);
  const Reference ref = reference(inputs, residual, gamma, T, H, d, 1e-6);
  cudaStream_t other = nullptr;
  CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  std::string err;
  {
    DevBuf in, res_in, g;
    std::vector<std::unique_ptr<DevBuf>> res_out(kCalls), out(kCalls);
    if (!(err = in.alloc(bytes, ctx.stream)).empty() || !(err = res_in.alloc(bytes, ctx.stream)).empty() ||
        !(err = g.alloc(H * 2, ctx.stream)).empty())
      return err;
    if (!(err = in.upload(inputs[ctx.rank].data(), bytes)).empty() || !(err = res_in.upload(residual.data(), bytes)).empty() ||
        !(err = g.upload(gamma.data(), H * 2)).empty())
      return err;
    for (int i = 0; i < kCalls; ++i) {
      res_out[i].reset(new DevBuf);
      out[i].reset(new DevBuf);
      if (!(err = res_out[i]->alloc(bytes, ctx.stream)).empty() || !(err = out[i]->alloc(bytes, ctx.stream)).empty()) return err;
      CK(cudaMemsetAsync(res_out[i]->p, 0xff, bytes, ctx.stream));
      CK(cudaMemsetAsync(out[i]->p, 0xff, bytes, ctx.stream));
    }
    CK(cudaStreamSynchronize(ctx.stream));
    for (int i = 0; i < kCalls; ++i) {
      const cudaStream_t s = i % 2 ? other : ctx.stream;
      OK(arfusion::commSetStrategy(ctx.comm, i % 3 == 0 ? Strategy::kOneShot : i % 3 == 1 ? Strategy::kTwoShot : Strategy::kAuto,
                                   SyncMode::kAuto));
      OK(arfusion::allReduceAddRMSNorm(ctx.comm, in.p, res_in.p, res_out[i]->p, g.p, out[i]->p, T, H, d, 1e-6f, s));
    }
    CK(cudaStreamSynchronize(other));
    CK(cudaStreamSynchronize(ctx.stream));
    const char* detail = nullptr;
    if (arfusion::commGetAsyncError(ctx.comm, &detail) != Status::kSuccess) return std::string("device error: ") + detail;
    for (int i = 0; i < kCalls && err.empty(); ++i) {
      const CheckResult a = check(download(*res_out[i]), ref, gamma, T, H, d, 1);
      const CheckResult b = check(download(*out[i]), ref, gamma, T, H, d, 2);
      if (!a.ok() || !b.ok()) err = "call " + std::to_string(i) + ": " + (a.ok() ? b.first : a.first);
    }
    OK(arfusion::commSetStrategy(ctx.comm, Strategy::kAuto, SyncMode::kAuto));
  }
  cudaStreamSynchronize(ctx.stream);
  cudaStreamDestroy(other);
  return err;
}

std::string scenarioTwoCommunicators(RankCtx& ctx, const arfusion::Config& config, int iterations) {
  // Communicator B over the same ranks and GPUs (an NCCL split of A's communicator).
  ncclComm_t nccl_b = nullptr;
  if (ncclCommSplit(ctx.nccl, 0, ctx.rank, &nccl_b, nullptr) != ncclSuccess) return "ncclCommSplit failed";
  arfusion::Communicator* comm_b = nullptr;
  const Status created = arfusion::commCreate(nccl_b, config, &comm_b);
  if (created != Status::kSuccess) {
    ncclCommDestroy(nccl_b);
    return std::string("commCreate(B): ") + arfusion::lastError();
  }
  cudaStream_t stream_b = nullptr;
  std::string err = [&]() -> std::string {
    CK(cudaStreamCreateWithFlags(&stream_b, cudaStreamNonBlocking));
    // Shapes that take every block the communicators may use: A a one-shot/two-shot at 8 MB, B at 2 MB.
    struct Side {
      arfusion::Communicator* comm;
      cudaStream_t stream;
      DType d;
      int64_t T, H;
      uint64_t seed;
      std::vector<uint8_t> residual, gamma;
      Reference ref;
      DevBuf in, res_in, g, golden_res, golden_out, res_out, out, counter;
    };
    Side sides[2];
    sides[0].comm = ctx.comm, sides[0].stream = ctx.stream, sides[0].d = DType::kBFloat16, sides[0].T = 512, sides[0].H = 8192, sides[0].seed = 8100;
    sides[1].comm = comm_b, sides[1].stream = stream_b, sides[1].d = DType::kFloat16, sides[1].T = 256, sides[1].H = 4096, sides[1].seed = 8200;
    for (Side& x : sides) {
      const size_t n = x.T * x.H, bytes = n * 2;
      std::vector<std::vector<uint8_t>> inputs(ctx.world);
      for (int r = 0; r < ctx.world; ++r) inputs[r] = randomTensor(n, x.d, x.seed + r);
      x.residual = randomTensor(n, x.d, x.seed + 50);
      x.gamma = randomTensor(x.H, x.d, x.seed + 51);
      x.ref = reference(inputs, x.residual, x.gamma, x.T, x.H, x.d, 1e-6);
      std::string e;
      for (DevBuf* b : {&x.in, &x.res_in, &x.golden_res, &x.golden_out, &x.res_out, &x.out})
        if (!(e = b->alloc(bytes, x.stream)).empty()) return e;
      if (!(e = x.g.alloc(x.H * 2, x.stream)).empty() || !(e = x.counter.alloc(8, x.stream)).empty()) return e;
      if (!(e = x.in.upload(inputs[ctx.rank].data(), bytes)).empty() || !(e = x.res_in.upload(x.residual.data(), bytes)).empty() ||
          !(e = x.g.upload(x.gamma.data(), x.H * 2)).empty())
        return e;
      CK(cudaMemsetAsync(x.counter.p, 0, 8, x.stream));
      for (DevBuf* b : {&x.golden_res, &x.golden_out}) CK(cudaMemsetAsync(b->p, 0xff, bytes, x.stream));
      // The golden output: one call alone, checked against the float64 reference.
      OK(arfusion::allReduceAddRMSNorm(x.comm, x.in.p, x.res_in.p, x.golden_res.p, x.g.p, x.golden_out.p, x.T, x.H, x.d, 1e-6f, x.stream));
      CK(cudaStreamSynchronize(x.stream));
      const CheckResult a = check(download(x.golden_res), x.ref, x.gamma, x.T, x.H, x.d, 1);
      const CheckResult b = check(download(x.golden_out), x.ref, x.gamma, x.T, x.H, x.d, 2);
      if (!a.ok() || !b.ok()) return "golden call: " + (a.ok() ? b.first : a.first);
    }
    // Both at once, issued in opposite orders on the two ranks, strategies changing: every call is
    // compared with the golden output on the device (outputs poisoned before each call).
    for (int i = 0; i < iterations; ++i) {
      for (int k = 0; k < 2; ++k) {
        Side& x = sides[(k + ctx.rank + i) % 2];
        const size_t bytes = x.T * x.H * 2;
        OK(arfusion::commSetStrategy(x.comm, i % 3 == 0 ? Strategy::kOneShot : i % 3 == 1 ? Strategy::kTwoShot : Strategy::kAuto,
                                     i % 2 ? SyncMode::kFlagBarrier : SyncMode::kAuto));
        CK(cudaMemsetAsync(x.res_out.p, 0xff, bytes, x.stream));
        CK(cudaMemsetAsync(x.out.p, 0xff, bytes, x.stream));
        OK(arfusion::allReduceAddRMSNorm(x.comm, x.in.p, x.res_in.p, x.res_out.p, x.g.p, x.out.p, x.T, x.H, x.d, 1e-6f, x.stream));
        CK(countMismatch(x.res_out.p, x.golden_res.p, bytes, static_cast<unsigned long long*>(x.counter.p), x.stream));
        CK(countMismatch(x.out.p, x.golden_out.p, bytes, static_cast<unsigned long long*>(x.counter.p), x.stream));
      }
    }
    for (Side& x : sides) {
      CK(cudaStreamSynchronize(x.stream));
      const char* detail = nullptr;
      if (arfusion::commGetAsyncError(x.comm, &detail) != Status::kSuccess) return std::string("device error: ") + detail;
      unsigned long long mism = 0;
      CK(cudaMemcpy(&mism, x.counter.p, 8, cudaMemcpyDeviceToHost));
      if (mism) return std::to_string(mism) + " mismatching words on the " + (&x == &sides[0] ? "first" : "second") + " communicator";
      OK(arfusion::commSetStrategy(x.comm, Strategy::kAuto, SyncMode::kAuto));
    }
    return "";
  }();
  if (stream_b) {
    cudaStreamSynchronize(stream_b);
    cudaStreamDestroy(stream_b);
  }
  arfusion::commDestroy(comm_b);
  ncclCommDestroy(nccl_b);
  return err;
}

std::string scenarioBadInput(RankCtx& ctx) {
  const DType d = DType::kBFloat16;
  const int64_t T = 4, H = 4096;
  const size_t bytes = T * H * 2;
  DevBuf in, res_in, res_out, g, out;
  std::string err;
  for (DevBuf* b : {&in, &res_in, &res_out, &out})
    if (!(err = b->alloc(bytes, ctx.stream)).empty()) return err;
  if (!(err = g.alloc(H * 2, ctx.stream)).empty()) return err;
  const auto hin = randomTensor(T * H, d, 900 + ctx.rank), hres = randomTensor(T * H, d, 950), hg = randomTensor(H, d, 951);
  if (!(err = in.upload(hin.data(), bytes)).empty() || !(err = res_in.upload(hres.data(), bytes)).empty() ||
      !(err = g.upload(hg.data(), H * 2)).empty())
    return err;
  std::vector<uint8_t> host(bytes, 1);
  void* other_dev_mem = nullptr;
  cudaStream_t other_stream = nullptr;
  if (gpuCount() > 1) {
    const int other = (ctx.device + 1) % gpuCount();
    cudaSetDevice(other);
    cudaMalloc(&other_dev_mem, bytes);
    cudaStreamCreate(&other_stream);
    cudaSetDevice(ctx.device);
  }
  struct Cleanup {
    void* m;
    cudaStream_t s;
    ~Cleanup() {
      if (m) cudaFree(m);
      if (s) cudaStreamDestroy(s);
    }
  } cleanup{other_dev_mem, other_stream};

  struct Bad {
    const char* what;
    std::function<Status()> call;
  };
  auto C = ctx.comm;
  const auto S = ctx.stream;
  std::vector<Bad> cases = {
      {"null input", [&] { return arfusion::allReduceAddRMSNorm(C, nullptr, res_in.p, res_out.p, g.p, out.p, T, H, d, 1e-6f, S); }},
      {"null gamma", [&] { return arfusion::allReduceAddRMSNorm(C, in.p, res_in.p, res_out.p, nullptr, out.p, T, H, d, 1e-6f, S); }},
      {"zero tokens", [&] { return arfusion::allReduceAddRMSNorm(C, in.p, res_in.p, res_out.p, g.p, out.p, 0, H, d, 1e-6f, S); }},
      {"hidden 0", [&] { return arfusion::allReduceAddRMSNorm(C, in.p, res_in.p, res_out.p, g.p, out.p, T, 0, d, 1e-6f, S); }},
      {"negative eps", [&] { return arfusion::allReduceAddRMSNorm(C, in.p, res_in.p, res_out.p, g.p, out.p, T, H, d, -1.f, S); }},
      {"bad dtype", [&] { return arfusion::allReduceAddRMSNorm(C, in.p, res_in.p, res_out.p, g.p, out.p, T, H, static_cast<DType>(5), 1e-6f, S); }},
      {"host input", [&] { return arfusion::allReduceAddRMSNorm(C, host.data(), res_in.p, res_out.p, g.p, out.p, T, H, d, 1e-6f, S); }},
      {"norm_out aliases input", [&] { return arfusion::allReduceAddRMSNorm(C, in.p, res_in.p, res_out.p, g.p, in.p, T, H, d, 1e-6f, S); }},
      {"allReduce null out", [&] { return arfusion::allReduce(C, in.p, nullptr, T, H, d, S); }},
      {"allReduceAdd host residual", [&] { return arfusion::allReduceAdd(C, in.p, host.data(), res_out.p, T, H, d, S); }},
  };
  if (other_dev_mem) {
    cases.push_back({"input on another device", [&] { return arfusion::allReduceAddRMSNorm(C, other_dev_mem, res_in.p, res_out.p, g.p, out.p, T, H, d, 1e-6f, S); }});
    cases.push_back({"stream of another device", [&] { return arfusion::allReduceAddRMSNorm(C, in.p, res_in.p, res_out.p, g.p, out.p, T, H, d, 1e-6f, other_stream); }});
  }
  // NormArgs options that cannot be used: refused with a reason, nothing written (the quantized
  // buffers included).
  DevBuf qv, qs, qscale;
  if (!(err = qv.alloc(bytes, ctx.stream)).empty() || !(err = qs.alloc(bytes, ctx.stream)).empty() ||
      !(err = qscale.alloc(16, ctx.stream)).empty())
    return err;
  const float one = 1.f;
  if (!(err = qscale.upload(&one, 4)).empty()) return err;
  auto norm = [&](auto mutate) {
    return [&, mutate] {
      arfusion::NormArgs a;
      a.input = in.p, a.residual_in = res_in.p, a.residual_out = res_out.p, a.gamma = g.p, a.norm_out = out.p;
      a.tokens = T, a.hidden = H, a.dtype = d;
      a.quant.format = arfusion::QuantFormat::kNvfp4;
      a.quant.values = qv.p, a.quant.scales = qs.p, a.quant.scale = static_cast<const float*>(qscale.p);
      mutate(a);
      return arfusion::allReduceAddRMSNorm(C, a, S);
    };
  };
  const float host_scale = 1.f;
  cases.push_back({"NormArgs: null quantized values", norm([](arfusion::NormArgs& a) { a.quant.values = nullptr; })});
  cases.push_back({"NormArgs: null scales", norm([](arfusion::NormArgs& a) { a.quant.scales = nullptr; })});
  cases.push_back({"NormArgs: host global scale", norm([&](arfusion::NormArgs& a) { a.quant.scale = &host_scale; })});
  cases.push_back({"NormArgs: hidden not a multiple of 16", norm([](arfusion::NormArgs& a) { a.hidden = H - 8; })});
  cases.push_back({"NormArgs: per-group with hidden 4032", norm([](arfusion::NormArgs& a) {
                     a.quant.format = arfusion::QuantFormat::kFp8PerGroup, a.hidden = 4032;
                   })});
  cases.push_back({"NormArgs: a layout of another format", norm([](arfusion::NormArgs& a) { a.quant.layout = arfusion::ScaleLayout::kUE8M0Packed; })});
  cases.push_back({"NormArgs: misaligned norm_out", norm([&](arfusion::NormArgs& a) { a.norm_out = static_cast<char*>(out.p) + 2; })});
  std::vector<uint8_t> want(bytes, 0x5a);
  for (const Bad& b : cases) {
    CK(cudaMemsetAsync(res_out.p, 0x5a, bytes, ctx.stream));
    CK(cudaMemsetAsync(out.p, 0x5a, bytes, ctx.stream));
    CK(cudaMemsetAsync(qv.p, 0x5a, bytes, ctx.stream));
    CK(cudaMemsetAsync(qs.p, 0x5a, bytes, ctx.stream));
    CK(cudaStreamSynchronize(ctx.stream));
    const Status st = b.call();
    if (st != Status::kInvalidArgument)
      return std::string(b.what) + ": expected kInvalidArgument, got " + arfusion::statusString(st);
    if (std::string(arfusion::lastError()).empty()) return std::string(b.what) + ": no message";
    CK(cudaStreamSynchronize(ctx.stream));
    if (download(res_out) != want || download(out) != want || download(qv) != want || download(qs) != want)
      return std::string(b.what) + ": an output was written";
  }
  // Still usable: a good call gives the right answer.
  ShapeCase good{d, 3, 1024, 4242};
  const std::string r = scenarioShape(ctx, good);
  return r.empty() ? "" : "after bad input: " + r;
}

}  // namespace arftest

// ---- the extended epilogue and its quantized outputs
namespace arftest {
namespace {

// A quantized output's buffers on the device, and the scale (static or global) it reads.
struct QuantBuffers {
  DevBuf values, scales, scale_in;
  size_t value_bytes = 0, scale_bytes = 0;
  std::string alloc(const QuantShapeCase& c, cudaStream_t s) {
    std::string e;
    if (arfusion::quantBufferBytes(c.quant.format, c.quant.layout, c.tokens, c.hidden, &value_bytes, &scale_bytes) !=
        Status::kSuccess)
      return std::string("quantBufferBytes: ") + arfusion::lastError();
    if (!(e = values.alloc(std::max<size_t>(value_bytes, 16), s)).empty() || !(e = scales.alloc(std::max<size_t>(scale_bytes, 16), s)).empty() ||
        !(e = scale_in.alloc(16, s)).empty())
      return e;
    return scale_in.upload(&c.quant.scale, sizeof(float));
  }
  std::string poison(cudaStream_t s, int byte) {
    CK(cudaMemsetAsync(values.p, byte, values.bytes, s));
    CK(cudaMemsetAsync(scales.p, byte, scales.bytes, s));
    return "";
  }
  arfusion::QuantOut out(const QuantShapeCase& c) const {
    arfusion::QuantOut q;
    q.format = c.quant.format;
    q.layout = c.quant.layout;
    q.pow2_scales = c.quant.pow2;
    q.values = values.p;
    q.scales = scale_bytes ? scales.p : nullptr;
    q.scale = static_cast<const float*>(scale_in.p);
    return q;
  }
  std::vector<uint8_t> valuesHost() const {
    auto v = download(values);
    v.resize(value_bytes);
    return v;
  }
  std::vector<uint8_t> scalesHost() const {
    auto v = download(scales);
    v.resize(scale_bytes);
    return v;
  }
};

// The NormArgs of a case: its options, the quantized output in q's buffers.
arfusion::NormArgs normArgsOf(const QuantShapeCase& c, const void* in, const void* res_in, void* res_out, const void* g, void* out,
                              const QuantBuffers& q) {
  arfusion::NormArgs a;
  a.input = in, a.residual_in = c.no_residual ? nullptr : res_in, a.residual_out = res_out, a.gamma = g;
  a.norm_out = out, a.tokens = c.tokens, a.hidden = c.hidden, a.dtype = c.dtype, a.eps = 1e-5f, a.gemma = c.gemma;
  a.quant = q.out(c);
  return a;
}

// The checks of one call's outputs: residual_out (unless absent) and norm_out against the float64
// reference, the quantized bytes against the recipe applied to norm_out, the dequantized values
// within the format's bound. "" or the first failure.
std::string verifyQuant(const QuantShapeCase& c, const Reference& ref, const std::vector<uint8_t>& gamma,
                        const std::vector<uint8_t>& res_out, const std::vector<uint8_t>& norm,
                        const std::vector<uint8_t>& values, const std::vector<uint8_t>& scales) {
  const DType d = c.dtype;
  if (!res_out.empty()) {
    const CheckResult cr = check(res_out, ref, gamma, c.tokens, c.hidden, d, 1, c.gemma);
    if (!cr.ok()) return "residual_out: " + std::to_string(cr.bad) + " wrong, " + std::to_string(cr.unwritten) + " unwritten; " + cr.first;
  }
  const CheckResult cn = check(norm, ref, gamma, c.tokens, c.hidden, d, 2, c.gemma);
  if (!cn.ok()) return "norm_out: " + std::to_string(cn.bad) + " wrong, " + std::to_string(cn.unwritten) + " unwritten; " + cn.first;
  if (c.quant.format == arfusion::QuantFormat::kNone) return "";
  std::vector<uint8_t> want_v, want_s;
  expectedQuant(c.quant, norm, c.tokens, c.hidden, d, &want_v, &want_s);
  for (size_t i = 0; i < want_v.size(); ++i)
    if (values[i] != want_v[i])
      return "quantized value byte " + std::to_string(i) + " is " + std::to_string(values[i]) + ", the recipe gives " +
             std::to_string(want_v[i]) + (values[i] == 0xa5 ? " (unwritten)" : "");
  for (size_t i = 0; i < want_s.size(); ++i)
    if (scales[i] != want_s[i])
      return "scale byte " + std::to_string(i) + " of " + std::to_string(want_s.size()) + " is " + std::to_string(scales[i]) +
             ", the recipe gives " + std::to_string(want_s[i]) + (scales[i] == 0xa5 ? " (unwritten)" : "");
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t h = 0; h < c.hidden; ++h) {
      const double x = toDouble(norm.data(), size_t(t * c.hidden + h), d);
      const double got = dequantized(c.quant, values, scales, c.tokens, c.hidden, t, h);
      const double bound = quantErrorBound(c.quant, scales, c.tokens, c.hidden, t, h, x);
      if (!(std::fabs(got - x) <= bound))
        return "dequantized [" + std::to_string(t) + "," + std::to_string(h) + "] = " + std::to_string(got) + ", norm_out " +
               std::to_string(x) + " (bound " + std::to_string(bound) + ")";
    }
  return "";
}

}  // namespace

std::string scenarioQuant(RankCtx& ctx, const QuantShapeCase& c) {
  const DType d = c.dtype;
  const size_t E = elemSize(d), n = size_t(c.tokens * c.hidden), bytes = n * E;
  std::vector<std::vector<uint8_t>> inputs(ctx.world);
  for (int r = 0; r < ctx.world; ++r) inputs[r] = randomTensor(n, d, c.seed * 64 + r);
  const auto residual = c.no_residual ? std::vector<uint8_t>() : randomTensor(n, d, c.seed * 64 + 40);
  const auto gamma = randomTensor(c.hidden, d, c.seed * 64 + 41);
  const Reference ref = reference(inputs, residual, gamma, c.tokens, c.hidden, d, 1e-5, c.gemma);
  DevBuf in, res_in, res_out, g, out;
  QuantBuffers q;
  std::string err;
  const cudaStream_t st = ctx.stream;
  for (DevBuf* b : {&in, &res_in, &res_out, &out})
    if (!(err = b->alloc(bytes, st)).empty()) return err;
  if (!(err = g.alloc(c.hidden * E, st)).empty() || !(err = q.alloc(c, st)).empty()) return err;
  if (!(err = in.upload(inputs[ctx.rank].data(), bytes)).empty() || !(err = g.upload(gamma.data(), c.hidden * E)).empty() ||
      (!c.no_residual && !(err = res_in.upload(residual.data(), bytes)).empty()))
    return err;
  std::vector<Variant> variants = pathVariants(ctx);
  variants.push_back({Strategy::kAuto, SyncMode::kAuto});
  std::vector<uint8_t> first_v, first_s;
  for (const Variant& v : variants) {
    const std::string what = std::string("[quant ") + arfusion::toString(c.quant.format) + "/" + arfusion::toString(c.quant.layout) +
                             (c.gemma ? " gemma" : "") + (c.no_residual ? " no-residual" : "") + " " + arfusion::toString(d) + " " +
                             std::to_string(c.tokens) + " x " + std::to_string(c.hidden) + " " + arfusion::toString(v.strategy) + "/" +
                             arfusion::toString(v.sync) + "] ";
    const Status set = arfusion::commSetStrategy(ctx.comm, v.strategy, v.sync);
    if (set == Status::kNotSupported && v.sync == SyncMode::kGridDependency) continue;  // as scenarioShape
    OK(set);
    std::vector<uint8_t> values, scales;
    const std::string local = [&]() -> std::string {
      arfusion::NormArgs a = normArgsOf(c, in.p, res_in.p, res_out.p, g.p, out.p, q);
      CK(cudaMemsetAsync(res_out.p, 0xff, bytes, st));
      CK(cudaMemsetAsync(out.p, 0xff, bytes, st));
      if (std::string e = q.poison(st, 0xa5); !e.empty()) return e;
      OK(arfusion::allReduceAddRMSNorm(ctx.comm, a, st));
      CK(cudaStreamSynchronize(st));
      const char* detail = nullptr;
      if (arfusion::commGetAsyncError(ctx.comm, &detail) != Status::kSuccess) return detail;
      values = q.valuesHost(), scales = q.scalesHost();
      if (std::string e = verifyQuant(c, ref, gamma, download(res_out), download(out), values, scales); !e.empty()) return e;
      if (c.quant.format == arfusion::QuantFormat::kNone) return "";
      // Without norm_out and residual_out: the same quantized bytes (and nothing else written).
      a.norm_out = nullptr, a.residual_out = nullptr;
      if (std::string e = q.poison(st, 0x5a); !e.empty()) return e;
      OK(arfusion::allReduceAddRMSNorm(ctx.comm, a, st));
      CK(cudaStreamSynchronize(st));
      if (arfusion::commGetAsyncError(ctx.comm, &detail) != Status::kSuccess) return detail;
      if (q.valuesHost() != values || q.scalesHost() != scales) return "without norm_out the quantized bytes differ";
      if (!first_v.empty() && (values != first_v || scales != first_s)) return "the quantized bytes differ from the first path's";
      return "";
    }();
    const std::string verdict = agreeStep(ctx, local, hashBytes(scales.data(), scales.size(), hashBytes(values.data(), values.size())));
    if (!verdict.empty()) return what + verdict;
    if (first_v.empty()) first_v = values, first_s = scales;
  }
  OK(arfusion::commSetStrategy(ctx.comm, Strategy::kAuto, SyncMode::kAuto));
  return "";
}

std::string checkAddRMSNormQuant(const QuantShapeCase& c) {
  const DType d = c.dtype;
  const size_t E = elemSize(d), n = size_t(c.tokens * c.hidden), bytes = n * E;
  const auto x = randomTensor(n, d, c.seed * 64);
  const auto residual = c.no_residual ? std::vector<uint8_t>() : randomTensor(n, d, c.seed * 64 + 40);
  const auto gamma = randomTensor(c.hidden, d, c.seed * 64 + 41);
  const Reference ref = reference({x}, residual, gamma, c.tokens, c.hidden, d, 1e-5, c.gemma);
  cudaStream_t st = nullptr;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::string err = [&]() -> std::string {
    DevBuf in, res_in, res_out, g, out;
    QuantBuffers q;
    std::string e;
    for (DevBuf* b : {&in, &res_in, &res_out, &out})
      if (!(e = b->alloc(bytes, st)).empty()) return e;
    if (!(e = g.alloc(c.hidden * E, st)).empty() || !(e = q.alloc(c, st)).empty()) return e;
    if (!(e = in.upload(x.data(), bytes)).empty() || !(e = g.upload(gamma.data(), c.hidden * E)).empty() ||
        (!c.no_residual && !(e = res_in.upload(residual.data(), bytes)).empty()))
      return e;
    const arfusion::NormArgs a = normArgsOf(c, in.p, res_in.p, res_out.p, g.p, out.p, q);
    CK(cudaMemsetAsync(res_out.p, 0xff, bytes, st));
    CK(cudaMemsetAsync(out.p, 0xff, bytes, st));
    if (std::string p = q.poison(st, 0xa5); !p.empty()) return p;
    OK(arfusion::addRMSNorm(a, st));
    CK(cudaStreamSynchronize(st));
    const std::vector<uint8_t> res_bytes = download(res_out), norm_bytes = download(out);
    const std::vector<uint8_t> values = q.valuesHost(), scales = q.scalesHost();
    if (std::string v = verifyQuant(c, ref, gamma, res_bytes, norm_bytes, values, scales); !v.empty()) return v;
    // In place, as the NCCL path and engines call it: x in norm_out, residual_in in residual_out.
    // Every output the same bytes (each element is read before it is written).
    if (!(e = out.upload(x.data(), bytes)).empty() || (!c.no_residual && !(e = res_out.upload(residual.data(), bytes)).empty()))
      return e;
    if (c.no_residual) CK(cudaMemsetAsync(res_out.p, 0xff, bytes, st));
    if (std::string p = q.poison(st, 0x3c); !p.empty()) return p;
    OK(arfusion::addRMSNorm(normArgsOf(c, out.p, res_out.p, res_out.p, g.p, out.p, q), st));
    CK(cudaStreamSynchronize(st));
    if (download(res_out) != res_bytes || download(out) != norm_bytes) return "in place: residual_out or norm_out differ";
    if (q.valuesHost() != values || q.scalesHost() != scales) return "in place: the quantized bytes differ";
    return "";
  }();
  cudaStreamDestroy(st);
  return err;
}

}  // namespace arftest
