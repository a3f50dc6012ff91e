// CPU tests: plan decisions, geometry, call signatures, workspace layout.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "arfusion/arfusion.h"
#include "cpu_helpers.h"
#include "host/arch.h"

using namespace arfusion;
using namespace arfusion::detail;
using namespace cputest;

TEST(Plan, SingleRankIsLocal) {
  Topology t;
  t.world = 1;
  const Plan p = planFor(t, Shape{4, 4096});
  EXPECT_EQ(p.strategy, Strategy::kNccl);
  EXPECT_NE(std::string(p.reason).find("single rank"), std::string::npos);
}

TEST(Plan, NoFusionTakesNcclAndSaysWhy) {
  Topology t = h200Pair();
  t.fusion_ok = false;
  t.no_fusion_reason = "rank 1: no peer access";
  const Plan p = planFor(t, Shape{1, 4096});
  EXPECT_EQ(p.strategy, Strategy::kNccl);
  EXPECT_NE(std::string(p.reason).find("no peer access"), std::string::npos);
  Status st;
  planFor(t, Shape{1, 4096}, Strategy::kOneShot, SyncMode::kAuto, &st);
  EXPECT_EQ(st, Status::kNotSupported);
}

TEST(Plan, H200PairFollowsTheMeasuredTable) {
  const Plan one = planFor(h200Pair(), Shape{4, 4096});
  EXPECT_EQ(one.strategy, Strategy::kOneShot);
  EXPECT_EQ(one.sync_mode, SyncMode::kGridDependency);
  EXPECT_EQ(one.blocks, 4);
  EXPECT_EQ(one.rows_per_step, 1);
  auto pick = [](int64_t tokens, int64_t hidden, DType d = DType::kBFloat16) {
    return planFor(h200Pair(), Shape{tokens, hidden, d}).strategy;
  };
  EXPECT_EQ(pick(16, 8192), Strategy::kOneShot);    // 256 KB
  EXPECT_EQ(pick(128, 8192), Strategy::kOneShot);   // 2 MB
  EXPECT_EQ(pick(128, 1024), Strategy::kOneShot);   // 128 one-row blocks
  EXPECT_EQ(pick(181, 4096), Strategy::kTwoShot);   // 1.4 MB, 181 rows
  EXPECT_EQ(pick(256, 8192), Strategy::kTwoShot);   // 4 MB
  EXPECT_EQ(pick(362, 8192), Strategy::kTwoShot);   // 5.9 MB
  EXPECT_EQ(pick(512, 8192), Strategy::kTwoShot);   // 8 MB
  EXPECT_EQ(pick(2048, 8192), Strategy::kTwoShot);  // 32 MB
  EXPECT_EQ(pick(8192, 8192), Strategy::kTwoShot);  // 128 MB
  // The token floor: rows below 133 tokens (one row per block of the one-shot on 132 SMs) stay on
  // the one-shot whatever their size.
  EXPECT_EQ(pick(128, 16384), Strategy::kOneShot);                   // 4 MB
  EXPECT_EQ(pick(128, 16384, DType::kFloat32), Strategy::kOneShot);  // 8 MB
  EXPECT_EQ(pick(132, 32768), Strategy::kOneShot);                   // 8.3 MB
  EXPECT_EQ(pick(132, 65536), Strategy::kTwoShot);  // 128 KB rows do not fit a one-shot step
  EXPECT_EQ(pick(132, 8192), Strategy::kOneShot);                    // 2.1 MB
  EXPECT_EQ(pick(133, 8192), Strategy::kTwoShot);                    // 2.1 MB, 133 rows
  EXPECT_EQ(pick(133, 16384), Strategy::kTwoShot);                   // 4.2 MB
  EXPECT_EQ(pick(256, 1024), Strategy::kOneShot);                    // 512 KiB: the byte rule
  EXPECT_EQ(pick(257, 1024), Strategy::kTwoShot);                    // 514 KiB, 257 tokens
  EXPECT_EQ(pick(144, 2048), Strategy::kTwoShot);                    // 576 KB of 4 KB rows
  EXPECT_EQ(pick(400, 1024), Strategy::kTwoShot);                    // 800 KB of 2 KB rows
  EXPECT_EQ(pick(512, 1024), Strategy::kTwoShot);                    // 1 MiB of 2 KB rows
  EXPECT_EQ(pick(182, 2880), Strategy::kTwoShot);                    // 1 MiB of 5.6 KB rows
  EXPECT_EQ(pick(128, 4096), Strategy::kOneShot);                    // 1 MiB, 128 tokens: the floor
  EXPECT_NE(std::string(planFor(h200Pair(), Shape{128, 16384}).reason).find("tokens < 133"), std::string::npos);
}

// Steps spread rows evenly: no nearly empty last wave of blocks.
TEST(Plan, GeometryBalancesStepsPerBlock) {
  const Plan p = planFor(h200Pair(), Shape{2048, 4096}, Strategy::kTwoShot, SyncMode::kAuto);
  const int64_t units = (2048 + 2 * p.rows_per_step - 1) / (2 * p.rows_per_step);
  const int64_t steps = (units + p.blocks - 1) / p.blocks;
  EXPECT_GE(units, steps * p.blocks - p.blocks / 4) << "last wave under-filled: R=" << p.rows_per_step << " blocks=" << p.blocks;
}

// Plan::lamport names the kernel a call runs: every GridDependency one-shot; a GridDependency
// two-shot only while each block takes one unit that fits a Lamport region (127 KB at 2 ranks and
// the default workspace: hidden 8192 bf16 up to R = 3, i.e. 792 tokens on 132 blocks).
TEST(Plan, ReportsTheLamportKernelWhereItRuns) {
  const Topology t = h200Pair();
  auto lamport = [&](int64_t tokens, int64_t hidden, Strategy s, SyncMode sync) {
    const Plan p = planFor(t, Shape{tokens, hidden}, s, sync);
    EXPECT_EQ(p.lamport, usesLamport(t, Shape{tokens, hidden}, p.strategy, p.sync_mode, p.blocks, p.rows_per_step));
    return p.lamport;
  };
  EXPECT_TRUE(lamport(1, 4096, Strategy::kOneShot, SyncMode::kGridDependency));
  EXPECT_TRUE(lamport(2048, 8192, Strategy::kOneShot, SyncMode::kGridDependency));  // many units: still Lamport
  EXPECT_FALSE(lamport(1, 4096, Strategy::kOneShot, SyncMode::kFlagBarrier));
  EXPECT_TRUE(lamport(512, 8192, Strategy::kTwoShot, SyncMode::kGridDependency));   // R = 2
  EXPECT_TRUE(lamport(792, 8192, Strategy::kTwoShot, SyncMode::kGridDependency));   // R = 3: the largest
  EXPECT_FALSE(lamport(793, 8192, Strategy::kTwoShot, SyncMode::kGridDependency));  // R = 4: 256 KB + headers
  EXPECT_FALSE(lamport(8192, 8192, Strategy::kTwoShot, SyncMode::kGridDependency)); // R = 16: 512 KB
  EXPECT_FALSE(lamport(512, 8192, Strategy::kTwoShot, SyncMode::kFlagBarrier));
  EXPECT_FALSE(lamport(4096, 8192, Strategy::kNccl, SyncMode::kGridDependency));
  // More units than blocks, each fitting a Lamport region: the flag kernel (the Lamport two-shot
  // runs unit b only). 4 blocks, 64 x 1024 bf16: R = 2, 16 units.
  Topology small = t;
  small.max_blocks = 4;
  small.region_bytes = 8192;
  const Plan many = planFor(small, Shape{64, 1024}, Strategy::kTwoShot, SyncMode::kGridDependency);
  ASSERT_EQ(many.blocks, 4);
  EXPECT_GT((64 + 2 * many.rows_per_step - 1) / (2 * many.rows_per_step), many.blocks);
  EXPECT_GE(small.lamport_region_bytes, kLamportHeaderBytes + size_t(2) * many.rows_per_step * 2048);
  EXPECT_FALSE(many.lamport);
  // Auto at 2 x H200 (GridDependency on SM90): a one-unit two-shot runs the Lamport kernel.
  const Plan a = planFor(t, Shape{512, 8192});
  EXPECT_EQ(a.strategy, Strategy::kTwoShot);
  EXPECT_TRUE(a.lamport);
}

// Plan::row_blocks: the Lamport one-shot spreads each row of a small message over a cluster, on
// the measured H200 pair only, where the clusters fit (Topology::row_clusters, set at creation).
TEST(Plan, SmallMessagesSpreadRowsOverClustersOnTheMeasuredPair) {
  Topology t = h200Pair();
  t.row_clusters[2] = 66;
  t.row_clusters[4] = 92;
  auto rowBlocks = [&](const Topology& topo, int64_t tokens, int64_t hidden, DType d = DType::kBFloat16,
                       SyncMode sync = SyncMode::kAuto) {
    const Plan p = planFor(topo, Shape{tokens, hidden, d}, Strategy::kAuto, sync);
    EXPECT_EQ(p.strategy, Strategy::kOneShot);
    EXPECT_EQ(p.blocks, (p.row_blocks > 1 ? tokens : std::min<int64_t>(tokens, topo.max_blocks)) * p.row_blocks)
        << tokens << " x " << hidden;
    EXPECT_EQ(p.row_blocks, p.lamport ? oneShotRowBlocks(topo, Shape{tokens, hidden, d}, p.blocks / p.row_blocks, p.rows_per_step) : 1);
    return p.row_blocks;
  };
  EXPECT_EQ(rowBlocks(t, 1, 4096), 4);    // 8 KB rows: 2 KB shares
  EXPECT_NE(std::string(planFor(t, Shape{1, 4096}).reason).find("4 blocks per row"), std::string::npos);
  EXPECT_EQ(rowBlocks(t, 16, 4096), 4);   // 128 KiB: the largest message
  EXPECT_EQ(rowBlocks(t, 17, 4096), 1);
  EXPECT_EQ(rowBlocks(t, 1, 8192), 4);
  EXPECT_EQ(rowBlocks(t, 16, 8192), 1);   // 256 KiB of 16 KB rows: measured slower over clusters
  // Rows of 32-64 KB: up to 16 tokens (1 MiB of fp32 16384).
  EXPECT_EQ(rowBlocks(t, 16, 16384), 4);
  EXPECT_EQ(rowBlocks(t, 17, 16384), 1);
  EXPECT_EQ(rowBlocks(t, 16, 16384, DType::kFloat32), 4);
  EXPECT_EQ(rowBlocks(t, 11, 8192, DType::kFloat32), 4);
  EXPECT_EQ(oneShotRowBlocks(t, Shape{3, 32768, DType::kFloat32}, 3, 1), 1);  // 128 KB rows: unmeasured
  EXPECT_EQ(rowBlocks(t, 1, 2048), 2);    // 4 KB rows: 2 shares of 2 KB
  EXPECT_EQ(rowBlocks(t, 1, 1024), 1);    // 2 KB rows
  EXPECT_EQ(rowBlocks(t, 2, 4096, DType::kFloat32), 4);
  EXPECT_EQ(rowBlocks(t, 1, 4096, DType::kBFloat16, SyncMode::kFlagBarrier), 1);  // the flag kernel: one block
  // Only as many clusters as are resident at once; then smaller ones.
  Topology few = t;
  few.row_clusters[4] = 2;
  EXPECT_EQ(rowBlocks(few, 3, 4096), 2);
  few.row_clusters[2] = 2;
  EXPECT_EQ(rowBlocks(few, 3, 4096), 1);
  Topology narrow = t;
  narrow.max_blocks = 8;
  EXPECT_EQ(rowBlocks(narrow, 3, 4096), 2);  // 12 blocks would not fit
  // Unmeasured topologies keep one block per row.
  Topology blackwell = t;
  blackwell.cc_major = 10;
  EXPECT_EQ(rowBlocks(blackwell, 1, 4096), 1);
  Topology three = t;
  three.world = 3;
  EXPECT_EQ(rowBlocks(three, 1, 4096), 1);
  Topology unknown = h200Pair();  // no clusters known
  EXPECT_EQ(rowBlocks(unknown, 1, 4096), 1);
}

TEST(Plan, ForcedSyncAndStrategyAreHonoured) {
  const Plan p = planFor(h200Pair(), Shape{4096, 8192}, Strategy::kTwoShot, SyncMode::kFlagBarrier);
  EXPECT_EQ(p.strategy, Strategy::kTwoShot);
  EXPECT_EQ(p.sync_mode, SyncMode::kFlagBarrier);
  // Auto's token floor does not touch a forced two-shot.
  EXPECT_EQ(planFor(h200Pair(), Shape{128, 16384}, Strategy::kTwoShot, SyncMode::kAuto).strategy, Strategy::kTwoShot);
}

TEST(Plan, NeverTwoShotWithFewerThanTwoRowsPerRank) {
  Topology t = h200Pair();
  t.world = 8;
  for (int64_t tokens : {1, 2, 7, 15}) {
    const Plan p = planFor(t, Shape{tokens, 65536});  // large rows push Auto to two-shot by size
    EXPECT_NE(p.strategy, Strategy::kTwoShot) << tokens;
  }
}

TEST(Plan, UnmeasuredArchesAreConservative) {
  for (int major : {10, 12}) {
    Topology t = h200Pair();
    t.cc_major = major;
    EXPECT_EQ(planFor(t, Shape{1, 4096}).strategy, Strategy::kOneShot) << major;
    EXPECT_EQ(planFor(t, Shape{4096, 8192}).strategy, Strategy::kNccl) << major;
  }
  Topology pcie = h200Pair();
  pcie.link = LinkType::kPCIe;
  EXPECT_EQ(planFor(pcie, Shape{1024, 8192}).strategy, Strategy::kNccl);
}

TEST(Plan, RowTooWideForTheWorkspaceFallsBack) {
  Topology t = h200Pair();
  t.region_bytes = 4096;
  EXPECT_EQ(planFor(t, Shape{4, 8192}).strategy, Strategy::kNccl);
  t = h200Pair();  // the one-shot also needs a Lamport region that holds the row
  t.lamport_region_bytes = 4096;
  EXPECT_EQ(planFor(t, Shape{4, 8192}).strategy, Strategy::kNccl);
  t = h200Pair();
  t.region_bytes = 4096;
  Status st;
  planFor(t, Shape{4, 8192}, Strategy::kOneShot, SyncMode::kAuto, &st);
  EXPECT_EQ(st, Status::kNotSupported);
  t.has_nccl = false;
  planFor(t, Shape{4, 8192}, Strategy::kAuto, SyncMode::kAuto, &st);
  EXPECT_EQ(st, Status::kNotSupported);
}

TEST(Plan, WithoutNcclAutoStaysFused) {
  Topology t = h200Pair();
  t.cc_major = 12;  // table says NCCL above 256 KB
  t.has_nccl = false;
  EXPECT_EQ(planFor(t, Shape{4096, 8192}).strategy, Strategy::kOneShot);
}

// Many narrow rows (plan.cpp narrowRowsToNccl): Auto takes the NCCL path above 10 rows per block
// of at most 512 B and above 36 of at most 1 KB, counted on max_blocks; forced strategies and
// groups without NCCL stay fused.
TEST(Plan, ManyNarrowRowsTakeTheNcclPath) {
  auto pick = [](const Topology& t, int64_t tokens, int64_t hidden, DType d = DType::kBFloat16) {
    return planFor(t, Shape{tokens, hidden, d}).strategy;
  };
  const Topology t = h200Pair();
  EXPECT_EQ(pick(t, 1320, 128), Strategy::kOneShot);   // 256 B rows, 10 per block
  EXPECT_EQ(pick(t, 1321, 128), Strategy::kNccl);      // 11 per block
  EXPECT_EQ(pick(t, 2048, 256), Strategy::kNccl);      // 512 B rows, 16 per block
  EXPECT_EQ(pick(t, 2048, 128, DType::kFloat32), Strategy::kNccl);  // 512 B rows of fp32
  EXPECT_EQ(pick(t, 4752, 512), Strategy::kTwoShot);   // 1 KB rows, 36 per block
  EXPECT_EQ(pick(t, 4753, 512), Strategy::kNccl);      // 37 per block
  EXPECT_EQ(pick(t, 32768, 1024), Strategy::kTwoShot); // 2 KB rows: fused at any count
  EXPECT_EQ(pick(t, 64, 64), Strategy::kOneShot);      // few rows
  EXPECT_NE(std::string(planFor(t, Shape{2048, 256}).reason).find("many rows of at most 1 KB"), std::string::npos);
  // Rows per block follow max_blocks (min SM count over ranks, so every rank alike).
  Topology small = t;
  small.max_blocks = 32;
  EXPECT_EQ(pick(small, 352, 256), Strategy::kNccl);  // 11 per block of 512 B
  // Forced strategies run; without NCCL Auto stays fused.
  EXPECT_EQ(planFor(t, Shape{2048, 256}, Strategy::kTwoShot).strategy, Strategy::kTwoShot);
  Topology no_nccl = t;
  no_nccl.has_nccl = false;
  EXPECT_EQ(pick(no_nccl, 2048, 256), Strategy::kTwoShot);  // 1 MiB, 2048 tokens: the table's pick
  EXPECT_EQ(std::string(planFor(no_nccl, Shape{2048, 256}).reason).find("many rows"), std::string::npos);
}

// Call signatures (sync.cuh): equal for equal calls, different when any field that changes what
// the peers send differs, and bit 31 always clear (the Lamport header's words must never be the
// all-ones "not arrived" pattern). Pointers and eps are per-rank and must not matter.
TEST(Signature, DependsOnWhatPeersExchangeAndNeverSetsBit31) {
  RowArgs a = makeRowArgs(Op::kAllReduceAddRMSNorm, nullptr, nullptr, nullptr, nullptr, nullptr, 128, 8192, 1e-6f);
  FusedLaunch l;
  l.blocks = 128;
  l.rows_per_step = 1;
  l.vector = true;
  l.dtype = DType::kBFloat16;
  const uint32_t base = callSignature(a, l, Strategy::kOneShot);
  RowArgs b = a;
  b.input = &b;
  b.eps = 1e-5f;
  EXPECT_EQ(callSignature(b, l, Strategy::kOneShot), base);
  std::vector<uint32_t> sigs = {base};
  RowArgs t = a;
  t.tokens = 129;
  sigs.push_back(callSignature(t, l, Strategy::kOneShot));
  RowArgs h = a;
  h.hidden = 8200;
  sigs.push_back(callSignature(h, l, Strategy::kOneShot));
  RowArgs o = a;
  o.op = Op::kAllReduceAdd;
  sigs.push_back(callSignature(o, l, Strategy::kOneShot));
  auto with = [&](auto change) {
    FusedLaunch m = l;
    change(m);
    return callSignature(a, m, Strategy::kOneShot);
  };
  sigs.push_back(with([](FusedLaunch& m) { m.dtype = DType::kFloat16; }));
  sigs.push_back(callSignature(a, l, Strategy::kTwoShot));
  sigs.push_back(with([](FusedLaunch& m) { m.blocks = 64; }));
  sigs.push_back(with([](FusedLaunch& m) { m.rows_per_step = 2; }));
  sigs.push_back(with([](FusedLaunch& m) { m.vector = false; }));
  for (size_t i = 0; i < sigs.size(); ++i)
    for (size_t j = i + 1; j < sigs.size(); ++j) EXPECT_NE(sigs[i], sigs[j]) << i << " vs " << j;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    RowArgs r = a;
    r.tokens = int64_t(rng() % 100000) + 1;
    r.hidden = int64_t(rng() % 65536) + 1;
    FusedLaunch m;
    m.dtype = static_cast<DType>(rng() % 3);
    m.blocks = int(rng() % 1024);
    m.rows_per_step = int(rng() % 64);
    m.vector = rng() & 1;
    EXPECT_EQ(callSignature(r, m, static_cast<Strategy>(rng() % 3)) >> 31, 0u);
  }
}

TEST(Plan, GeometryCoversEveryRowAndFitsTheRegion) {
  int checked = 0;  // shapes the geometry accepted: the checks below ran on them
  for (int world : {2, 3, 4, 8}) {
    Topology t = h200Pair();
    t.world = world;
    for (Strategy s : {Strategy::kOneShot, Strategy::kTwoShot}) {
      for (int64_t tokens : {1, 2, 3, 17, 129, 1000, 4097, 16384}) {
        for (int64_t hidden : {1024, 2880, 8192}) {
          int blocks = 0, rows = 0;
          std::string why;
          const Shape sh{tokens, hidden, DType::kBFloat16};
          if (!fusedGeometry(t, s, sh, &blocks, &rows, &why)) continue;
          ++checked;
          const int64_t unit = (s == Strategy::kTwoShot ? world : 1) * int64_t(rows);
          const int64_t units = (tokens + unit - 1) / unit;
          EXPECT_GE(rows, 1);
          EXPECT_GE(units * unit, tokens);  // block b takes units b, b + blocks, ...: all of them
          EXPECT_GE(blocks, 1);
          EXPECT_LE(blocks, t.max_blocks);
          EXPECT_LE(blocks, units);
          const int64_t per_r = (s == Strategy::kTwoShot ? 2 : 1) * (world - 1) * int64_t(rowStride(hidden, sh.dtype));
          EXPECT_LE(rows * per_r, int64_t(t.region_bytes));
          if (s == Strategy::kOneShot) {
            EXPECT_LE(rows * per_r + int64_t(kLamportHeaderBytes), int64_t(t.lamport_region_bytes));
          }
        }
      }
    }
  }
  EXPECT_GE(checked, 150) << "of 192 shapes, only " << checked << " had a geometry";
}

// A one-shot step never puts more than 128 KiB into a region, however large the region (it does not
// overlap a block's push with its reduction: fewer, larger steps measured slower); the pipelined
// two-shot takes steps as large as the region allows for rows wider than 16 KB, and about 128 KiB
// per peer and phase for narrower rows (the split steps 3-5 of twoshot.cu). Regions of a 256 MiB
// workspace here (the Lamport area stays 32 MiB).
TEST(Plan, OneShotStepsStaySmallTwoShotStepsGrowWithTheRegion) {
  Topology t = h200Pair();
  t.region_bytes = (size_t(224) << 20) / (132 * 2) / 16 * 16;  // ~890 KB
  t.lamport_region_bytes = (size_t(32) << 20) / (132 * 2) / 16 * 16;
  const Shape sh{8192, 8192, DType::kBFloat16};                 // 16 KB rows
  int blocks = 0, rows = 0;
  ASSERT_TRUE(fusedGeometry(t, Strategy::kOneShot, sh, &blocks, &rows, nullptr));
  EXPECT_LE(int64_t(rows) * 16384, 128 * 1024);
  EXPECT_GE(rows, 7);  // the 64 MiB workspace's steps, where it measured fastest
  const Shape wide{8192, 16384, DType::kBFloat16};  // 32 KB rows: no split, the fewest steps
  ASSERT_TRUE(fusedGeometry(t, Strategy::kTwoShot, wide, &blocks, &rows, nullptr));
  EXPECT_EQ(rows, 11);  // 32 rows per block in 3 steps: a region holds 13 rows of R
  // A row wider than the cap still fuses, one row per step, where a region holds it (16 blocks).
  t.max_blocks = 16;
  t.region_bytes = (size_t(224) << 20) / (16 * 2) / 16 * 16;
  t.lamport_region_bytes = (size_t(32) << 20) / (16 * 2) / 16 * 16;
  ASSERT_TRUE(fusedGeometry(t, Strategy::kOneShot, Shape{4, 131072, DType::kBFloat16}, &blocks, &rows, nullptr));
  EXPECT_EQ(rows, 1);
}

// Two-shot steps of rows up to 16 KB hold about 128 KiB per peer and phase (plan.cpp: the
// measured best once a block's peer-row epilogue overlaps its next step's push), never more rows
// than the block has, and the same rows per step on every rank (a function of the shape).
TEST(Plan, TwoShotStepsOfNarrowRowsHold128KiBPerPeer) {
  Topology t = h200Pair();
  t.region_bytes = (size_t(224) << 20) / (132 * 2) / 16 * 16;
  t.lamport_region_bytes = (size_t(32) << 20) / (132 * 2) / 16 * 16;
  auto rows = [&](int64_t tokens, int64_t hidden, DType d) {
    int blocks = 0, r = 0;
    EXPECT_TRUE(fusedGeometry(t, Strategy::kTwoShot, Shape{tokens, hidden, d}, &blocks, &r, nullptr));
    return r;
  };
  EXPECT_EQ(rows(8192, 8192, DType::kBFloat16), 8);    // 4 steps of 8 rows (was 2 of 16)
  EXPECT_EQ(rows(8192, 4096, DType::kBFloat16), 16);   // 2 steps of 16 (was 1 of 32)
  EXPECT_EQ(rows(2048, 8192, DType::kBFloat16), 8);    // one step, unchanged
  EXPECT_EQ(rows(8192, 4096, DType::kFloat32), 8);     // 16 KB rows
  EXPECT_EQ(rows(8192, 16384, DType::kBFloat16), 11);  // 32 KB rows: only the region caps
  EXPECT_EQ(rows(300, 8192, DType::kBFloat16), 2);     // few rows: what the block has
}

// The kernels index a step's rows in 32 bits (rows * 16-byte vectors, or rows * elements on the
// scalar path, must stay below 2^31): a step never fills more than 1 GiB of a region, however large
// the workspace. Here one block's region is 8 GiB (a 16 GiB workspace, one block).
TEST(Plan, StepsStayBelowOneGiBForThe32BitIndex) {
  Topology t = h200Pair();
  t.max_blocks = 1;
  t.region_bytes = size_t(8) << 30;
  t.lamport_region_bytes = size_t(32) << 20;
  for (DType d : {DType::kBFloat16, DType::kFloat32}) {
    const Shape sh{int64_t(1) << 20, 65536, d};  // 2^20 rows of 128-256 KB
    int blocks = 0, rows = 0;
    ASSERT_TRUE(fusedGeometry(t, Strategy::kTwoShot, sh, &blocks, &rows, nullptr));
    const int64_t step_bytes = int64_t(rows) * 2 * (t.world - 1) * int64_t(rowStride(sh.hidden, d));
    EXPECT_LE(step_bytes, int64_t(1) << 30);
    EXPECT_LT(int64_t(rows) * sh.hidden, int64_t(1) << 31);  // elements: the scalar path's index
    EXPECT_GT(step_bytes, int64_t(1) << 29);                  // and the cap, not something smaller, decided
  }
}

// The Lamport area (one-shot) takes half the workspace, up to 32 MiB per peer; the flag-protocol
// area the rest. Areas do not overlap and stay inside the allocation.
TEST(Workspace, LamportAreaIsCappedTheDataAreaTakesTheRest) {
  for (int world : {1, 2, 3, 8}) {
    const size_t cap = (size_t(32) << 20) * size_t(world > 1 ? world - 1 : 1);
    for (size_t mib : {1, 8, 64, 128, 256, 1024}) {
      const size_t ws = mib << 20;
      const WorkspaceLayout L(ws, world);
      EXPECT_EQ(L.lamport_bytes, std::min<size_t>(ws / 2, cap)) << mib << " MiB, world " << world;
      EXPECT_EQ(L.dataOffset(), WorkspaceLayout::kLamportOffset + L.lamport_bytes);
      EXPECT_EQ(L.dataOffset() + L.dataBytes(), L.total());
      EXPECT_EQ(L.dataOffset() % 4096, 0u);
      for (int blocks : {8, 132}) {
        EXPECT_LE(size_t(blocks) * kSlots * L.lamportRegionBytes(blocks), L.lamport_bytes);
        EXPECT_LE(size_t(blocks) * kSlots * L.regionBytes(blocks), L.dataBytes());
        EXPECT_EQ(L.regionBytes(blocks) % 16, 0u);
        EXPECT_EQ(L.lamportRegionBytes(blocks) % 16, 0u);
      }
    }
  }
  // 2 ranks: 64 MiB splits in half; 256 MiB keeps a 32 MiB Lamport area, the rest is the data area.
  EXPECT_EQ(WorkspaceLayout(size_t(64) << 20, 2).regionBytes(132), WorkspaceLayout(size_t(64) << 20, 2).lamportRegionBytes(132));
  EXPECT_GT(WorkspaceLayout(size_t(256) << 20, 2).regionBytes(132), 6 * WorkspaceLayout(size_t(256) << 20, 2).lamportRegionBytes(132));
  // 8 ranks with the default 256 MiB: a one-shot step of one 16384-wide fp32 row (7 peers x 64 KiB)
  // still fits a Lamport region, as it did before the cap.
  EXPECT_GE(WorkspaceLayout(size_t(256) << 20, 8).lamportRegionBytes(132), size_t(7) * 65536);
}

TEST(Plan, IsAPureFunctionOfItsInputs) {
  const Topology t = h200Pair();
  for (int64_t tokens : {1, 3, 300, 8192}) {
    const Plan a = planFor(t, Shape{tokens, 4096}), b = planFor(t, Shape{tokens, 4096});
    EXPECT_EQ(a.strategy, b.strategy);
    EXPECT_EQ(a.blocks, b.blocks);
    EXPECT_EQ(a.rows_per_step, b.rows_per_step);
    EXPECT_STREQ(a.reason, b.reason);
  }
}

TEST(Plan, ReasonKeepsTheSyncOutcomeBehindALongTuningFilePath) {
  const Topology t = h200Pair();
  AutoTable table = builtinTable(t);
  table.source = "/" + std::string(300, 'd') + "/tuning-h200.txt";
  PlanInputs in;
  in.topo = t;
  in.sync_auto = SyncMode::kFlagBarrier;
  in.sync_auto_reason = "self-check: GridDependency gave wrong results (3 rounds), using flag barrier";
  in.table = &table;
  for (int64_t tokens : {1, 300}) {
    Plan p;
    ASSERT_EQ(makePlan(in, Shape{tokens, 4096}, &p), Status::kSuccess) << lastError();
    const std::string reason = p.reason;
    EXPECT_LT(reason.size(), sizeof p.reason);
    EXPECT_NE(reason.find("tuning-h200.txt"), std::string::npos) << reason;
    EXPECT_NE(reason.find("using flag barrier"), std::string::npos) << reason;
  }
  // Whatever is still too long is cut with a visible mark, never silently.
  in.sync_auto_reason = std::string(400, 'x');
  Plan p;
  ASSERT_EQ(makePlan(in, Shape{1, 4096}, &p), Status::kSuccess) << lastError();
  const std::string reason = p.reason;
  EXPECT_EQ(reason.size(), sizeof p.reason - 1);
  EXPECT_EQ(reason.substr(reason.size() - 3), "...");
}

// The creation-time speed check's table (selfcheck.cpp measures, speedCheckTable decides).
TEST(Plan, SpeedCheckTableTakesTheOneShotOnlyWhereItWasFaster) {
  Topology t = h200Pair();
  t.world = 8;
  t.link = LinkType::kPCIe;
  t.cc_major = 12;
  const WorkspaceLayout layout(size_t(256) << 20, 8);
  t.region_bytes = layout.regionBytes(132);
  t.lamport_region_bytes = layout.lamportRegionBytes(132);
  EXPECT_FALSE(builtinTable(t).measured);
  EXPECT_TRUE(builtinTable(h200Pair()).measured);
  auto sizes = [](std::vector<std::pair<double, double>> us) {  // (one-shot, NCCL) at 8, 32, 128, 512 KiB
    std::vector<SizeTiming> v;
    int64_t tokens = 1;
    for (auto [fused, nccl] : us) {
      SizeTiming m;
      m.tokens = tokens;
      m.bytes = tokens * 8192;
      m.us_oneshot = fused;
      m.us_nccl = nccl;
      m.us_twoshot = 1.0;  // never considered: the check times the one-shot only
      v.push_back(m);
      tokens *= 4;
    }
    return v;
  };
  auto strategyAt = [&](const AutoTable& table, int64_t tokens) {
    PlanInputs in;
    in.topo = t;
    in.sync_auto = SyncMode::kFlagBarrier;
    in.sync_auto_reason = "test";
    in.table = &table;
    Plan p;
    EXPECT_EQ(makePlan(in, Shape{tokens, 4096}, &p), Status::kSuccess) << lastError();
    EXPECT_NE(std::string(p.reason).find("speed check"), std::string::npos) << p.reason;
    return p.strategy;
  };
  // Faster everywhere: the one-shot up to 512 KiB, the NCCL path above.
  AutoTable a = speedCheckTable(sizes({{5, 20}, {6, 22}, {9, 25}, {20, 40}}));
  EXPECT_TRUE(a.measured);
  EXPECT_EQ(a.source, "speed check at creation");
  ASSERT_EQ(a.checked.size(), 4u);
  EXPECT_EQ(strategyAt(a, 1), Strategy::kOneShot);
  EXPECT_EQ(strategyAt(a, 64), Strategy::kOneShot);
  EXPECT_EQ(strategyAt(a, 65), Strategy::kNccl);
  EXPECT_EQ(strategyAt(a, 4096), Strategy::kNccl);
  // Slower from 128 KiB, and within the 3% margin at 32 KiB: the one-shot at 8 KiB only.
  AutoTable b = speedCheckTable(sizes({{5, 20}, {21.8, 22}, {30, 25}, {60, 40}}));
  EXPECT_EQ(strategyAt(b, 1), Strategy::kOneShot);
  EXPECT_EQ(strategyAt(b, 2), Strategy::kNccl);
  EXPECT_EQ(strategyAt(b, 16), Strategy::kNccl);
  EXPECT_EQ(strategyAt(b, 64), Strategy::kNccl);
  // Slower everywhere (the SM120 incident's shape of failure), or unable to run: the NCCL path.
  AutoTable c = speedCheckTable(sizes({{50, 20}, {60, 22}, {std::nan(""), 25}, {200, 40}}));
  ASSERT_EQ(c.rules.size(), 1u);
  EXPECT_EQ(c.rules[0].strategy, Strategy::kNccl);
  EXPECT_EQ(strategyAt(c, 1), Strategy::kNccl);
  // Its reason keeps every timing and the self-check's outcome within Plan::reason, also with
  // three-digit timings and the longest arch policy text.
  t.cc_major = 10;
  PlanInputs in;
  in.topo = t;
  in.sync_auto = SyncMode::kGridDependency;
  in.sync_auto_reason = std::string(archPolicy(10, 0).why) + "; self-check passed (griddep 123.45 us, flag 234.56 us per call)";
  AutoTable d = speedCheckTable(sizes({{105.5, 120.5}, {110.5, 130.5}, {150.5, 160.5}, {300.5, 400.5}}));
  in.table = &d;
  Plan p;
  ASSERT_EQ(makePlan(in, Shape{1, 4096}, &p), Status::kSuccess) << lastError();
  std::string reason = p.reason;
  for (const char* part : {"speed check", "(8 KiB: one-shot 105.5 us, NCCL 120.5 us)", "self-check passed (griddep 123.45 us, flag 234.56 us per call)"})
    EXPECT_NE(reason.find(part), std::string::npos) << part << " missing: " << reason;
  // Each size quotes the timing that decided it; above the largest size checked, the NCCL path.
  ASSERT_EQ(makePlan(in, Shape{40, 4096}, &p), Status::kSuccess) << lastError();
  reason = p.reason;
  EXPECT_NE(reason.find("(512 KiB: one-shot 300.5 us, NCCL 400.5 us)"), std::string::npos) << reason;
  ASSERT_EQ(makePlan(in, Shape{65, 4096}, &p), Status::kSuccess) << lastError();
  reason = p.reason;
  EXPECT_EQ(p.strategy, Strategy::kNccl);
  EXPECT_NE(reason.find("(above the 512 KiB checked)"), std::string::npos) << reason;
}

// A GridDependency refused at creation (its self-check failed, or never ran on an unvalidated
// arch) is refused by every plan that would run it, with the reason; Auto and FlagBarrier plan
// as before.
TEST(Plan, ARefusedGridDependencyIsNeverPlanned) {
  const Topology t = h200Pair();
  AutoTable table = builtinTable(t);
  PlanInputs in;
  in.topo = t;
  in.table = &table;
  in.sync_auto = SyncMode::kFlagBarrier;
  in.griddep_allowed = false;
  in.griddep_refusal = "the test's reason";
  Plan p;
  for (Strategy s : {Strategy::kOneShot, Strategy::kTwoShot, Strategy::kAuto}) {
    in.strategy = s;
    in.sync = SyncMode::kGridDependency;
    EXPECT_EQ(makePlan(in, Shape{8, 4096}, &p), Status::kNotSupported) << toString(s);
    EXPECT_NE(std::string(lastError()).find("the test's reason"), std::string::npos) << lastError();
    in.sync = SyncMode::kAuto;
    ASSERT_EQ(makePlan(in, Shape{8, 4096}, &p), Status::kSuccess) << lastError();
    EXPECT_EQ(p.sync_mode, SyncMode::kFlagBarrier);
  }
  in.strategy = Strategy::kNccl;  // no fused kernel: the sync mode does not matter
  in.sync = SyncMode::kGridDependency;
  EXPECT_EQ(makePlan(in, Shape{8, 4096}, &p), Status::kSuccess) << lastError();
}

// testing::forceRowBlocks: clusters wherever they fit, on any topology, never beyond the agreed
// occupancy (row_clusters), the grid cap or the 2 KiB share, so that no cluster launch can fail.
TEST(Plan, ForcedRowBlocksOnlyWhereTheyFit) {
  Topology t = h200Pair();
  t.link = LinkType::kSameDevice;  // a local group on one GPU: no clusters by the library's own rule
  t.max_blocks = 16;
  t.row_clusters[2] = 8;
  t.row_clusters[4] = 3;
  const Shape row8k{2, 4096};  // 8 KB rows
  EXPECT_EQ(oneShotRowBlocks(t, row8k, 2, 1), 1);
  EXPECT_EQ(oneShotRowBlocks(t, row8k, 2, 1, 4), 4);
  EXPECT_EQ(oneShotRowBlocks(t, row8k, 2, 1, 2), 2);
  EXPECT_EQ(oneShotRowBlocks(t, Shape{4, 4096}, 4, 1, 4), 1);   // 4 rows > 3 clusters of 4 resident
  EXPECT_EQ(oneShotRowBlocks(t, Shape{4, 4096}, 4, 1, 2), 2);
  EXPECT_EQ(oneShotRowBlocks(t, Shape{5, 4096}, 5, 1, 4), 1);   // 20 blocks > max_blocks
  EXPECT_EQ(oneShotRowBlocks(t, Shape{2, 2048}, 2, 1, 4), 1);   // 1 KiB shares
  EXPECT_EQ(oneShotRowBlocks(t, row8k, 1, 2, 4), 1);            // two rows per block
  t.row_clusters[4] = 0;                                         // no cluster launch on some rank
  EXPECT_EQ(oneShotRowBlocks(t, row8k, 2, 1, 4), 1);
  Topology pair = h200Pair();
  pair.row_clusters[4] = 0;
  pair.row_clusters[2] = 0;
  EXPECT_EQ(oneShotRowBlocks(pair, Shape{1, 4096}, 1, 1), 1);  // the pair's own rule, no occupancy
}
