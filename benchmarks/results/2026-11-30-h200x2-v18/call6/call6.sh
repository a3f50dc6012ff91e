#!/usr/bin/env bash
# Session 18 call 6, bench only, not landed: would rows over clusters pay above 128 KiB for wide
# rows? Main (oneShotRowBlocks caps the message at 128 KiB) against the same code with the cap at
# 1 MiB (sed on a copy), arfusion-bench 8 KB-1 MiB at hidden 8192 + 16384, bf16 + fp32, 2 runs each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
rm -rf /tmp/v && mkdir /tmp/v && git ls-files -z | xargs -0 cp --parents -t /tmp/v
sed -i 's/constexpr int64_t kMaxMessage = 128 \* kKiB/constexpr int64_t kMaxMessage = 1024 * kKiB/' /tmp/v/src/host/plan.cpp
grep -n "kMaxMessage =" /tmp/v/src/host/plan.cpp > $R/variant.txt
for v in a b; do src=.; [ $v = b ] && src=/tmp/v
  ( cmake -S $src -B /tmp/b$v -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
    && cmake --build /tmp/b$v -j 16 --target arfusion-bench > $R/build-$v.log 2>&1; echo "$v rc=$?" > $R/rc-$v.txt ) &
done; wait; ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
for i in 1 2; do for v in a b; do
  timeout 60 /tmp/b$v/benchmarks/arfusion-bench --hidden 8192,16384 --dtypes bf16,fp32 --max-bytes 1048576 --out $R/sw-$v-$i > $R/sw-$v-$i.txt 2>&1
done; done; ts sweeps
tar czf $OUT/r.tgz -C $OUT r
for v in a b; do echo "== $v"; grep -E "^(bf16|fp32) " $R/sw-$v-1.txt | awk '{print $1,$2,$3,$4,$7,$8,$10}' ; done | head -80
for v in a b; do echo "== $v run 2"; grep -E "^(bf16|fp32) " $R/sw-$v-2.txt | awk '{print $1,$2,$3,$8}' | tr '\n' ';'; echo; done
