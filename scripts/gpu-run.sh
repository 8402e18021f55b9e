#!/usr/bin/env bash
# Runs on the GPU host, from the repository root: every GPU test binary, then every benchmark.
# Copied into the bundle as .gpu/run by scripts/gpu-bundle. Results go to $OUT (or ./gpu-out):
# <test>.xml per test binary, bench.json, and the whole log. Exits non-zero if any test fails or
# covflow-bench does (no usable device, or a row whose result disagrees with the vendor's).
#   usage: .gpu/run [--quick] [--tests-only] [--bench-only] [--filter=GTEST_FILTER] [--shards=N] [--pack]
#                   [extra covflow-bench args...]
# --pack leaves two files in $OUT, the log and gpu-results.tgz with everything else (the device
# tool brings back at most 8 files).
# Each binary runs under a time limit (COVFLOW_TEST_TIMEOUT, COVFLOW_BENCH_TIMEOUT seconds) so a
# hung kernel is reported as a failure instead of eating the whole lease. --shards=N runs each test
# binary as N GoogleTest shards at once on the one GPU (most of a GPU test's time is the host's
# reference checks; linalg_gpu_test alone takes longer than one device call allows).
set -uo pipefail
# This host has a GPU: a GPU test that finds none fails instead of skipping, and covflow-bench
# refuses to run on the CPU alone, so a broken driver or bundle cannot pass as a clean run.
export COVFLOW_REQUIRE_GPU=1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/env.sh"
out=${OUT:-gpu-out}
mkdir -p "$out"
quick=() run_tests=1 run_bench=1 bench_args=() filter='*' shards=1 pack=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=(--quick) ;;
    --filter=*) filter=${arg#--filter=} ;;
    --shards=*) shards=${arg#--shards=} ;;
    --pack) pack=1 ;;
    --tests-only) run_bench=0 ;;
    --bench-only) run_tests=0 ;;
    *) bench_args+=("$arg") ;;
  esac
done
exec > >(tee "$out/gpu-run.log") 2>&1

echo "== covflow GPU run: commit $(cat "$here/commit"), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader || true
"$here/bin/covflow" devices

failed=()
if [[ $run_tests -eq 1 ]]; then
  while read -r t; do
    echo "== $t"
    if [[ $shards -le 1 ]]; then
      if ! timeout "${COVFLOW_TEST_TIMEOUT:-540}" "$here/bin/$t" --gtest_output="xml:$out/$t.xml" --gtest_brief=1 \
          --gtest_filter="$filter"; then failed+=("$t"); fi
      continue
    fi
    # Waited for by PID: a bare `wait` would also wait for the tee above, which ends only with this script.
    pids=()
    for ((i = 0; i < shards; i++)); do
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout -k 10 "${COVFLOW_TEST_TIMEOUT:-540}" "$here/bin/$t" \
        --gtest_output="xml:$out/$t.shard$i.xml" --gtest_brief=1 --gtest_filter="$filter" > "$out/$t.shard$i.log" 2>&1 &
      pids+=($!)
    done
    for ((i = 0; i < shards; i++)); do
      wait "${pids[$i]}"; rc=$?
      echo "-- shard $i of $shards (exit $rc)"
      cat "$out/$t.shard$i.log"
      [[ $rc -eq 0 ]] || failed+=("$t shard $i")
    done
  done < "$here/gpu_tests.txt"
fi
if [[ $run_bench -eq 1 ]]; then
  echo "== covflow-bench all"
  # Options alone name no benchmark: run them all.
  has_subcommand=0
  for a in "${bench_args[@]}"; do [[ "$a" == -* ]] || has_subcommand=1; done
  [[ $has_subcommand -eq 1 ]] || bench_args+=(all)
  timeout "${COVFLOW_BENCH_TIMEOUT:-400}" "$here/bin/covflow-bench" "${quick[@]}" --json "$out/bench.json" "${bench_args[@]}" \
    || failed+=(covflow-bench)
fi
status=0
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "== FAILED: ${failed[*]}"
  status=1
else
  echo "== all GPU tests and benchmarks passed"
fi
if [[ $pack -eq 1 ]]; then
  (cd "$out" && find . -maxdepth 1 -type f ! -name gpu-run.log ! -name gpu-results.tgz -printf '%f\n' |
    tar czf gpu-results.tgz -T - --remove-files)
fi
exit $status
