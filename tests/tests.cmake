# Tests: each is its own process with a timeout (CTest). Labels:
#   unit, integration, reference (needs /usr/bin/python3 with torch), slow,
#   san (also run in the ASan/UBSan build).
set(GRIT_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch for reference tests")

add_executable(grit-parity-dump tests/reference/parity_dump.c)
target_link_libraries(grit-parity-dump PRIVATE gritcore)

file(GLOB GRIT_UNIT_TESTS CONFIGURE_DEPENDS tests/unit/*/test_*.c)
if(NOT (CURL_FOUND AND CRYPTO_FOUND))
  list(FILTER GRIT_UNIT_TESTS EXCLUDE REGEX "/unit/s3/")
endif()
foreach(src ${GRIT_UNIT_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE gritcore)
  add_test(NAME unit.${name} COMMAND ${name})
  set_tests_properties(unit.${name} PROPERTIES TIMEOUT 120 LABELS "unit;san")
endforeach()

# The layer order (scripts/layers.txt, docs/architecture.md): no #include in src/
# points to a higher layer or a sibling; the selftest plants violations.
add_test(NAME unit.layers
  COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check-layers.sh ${CMAKE_SOURCE_DIR}/src
          ${CMAKE_SOURCE_DIR}/scripts/layers.txt)
add_test(NAME unit.layers_selftest
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/unit/layers/selftest.sh
          ${CMAKE_SOURCE_DIR}/scripts/check-layers.sh ${CMAKE_SOURCE_DIR}/scripts/layers.txt)
set_tests_properties(unit.layers unit.layers_selftest PROPERTIES TIMEOUT 300 LABELS "unit")

# Every GRIT_* variable the code reads is listed in docs/env.md; the selftest plants
# an undocumented one.
add_test(NAME unit.env_doc
  COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check-env-doc.sh ${CMAKE_SOURCE_DIR}/docs/env.md
          ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/plugins)
add_test(NAME unit.env_doc_selftest
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/unit/env/selftest.sh
          ${CMAKE_SOURCE_DIR}/scripts/check-env-doc.sh ${CMAKE_SOURCE_DIR}/docs/env.md)
set_tests_properties(unit.env_doc unit.env_doc_selftest PROPERTIES TIMEOUT 60 LABELS "unit")

# The kernels that call tensor/mathfn.h's exp/erfc compiled to packed SIMD code (a
# Release build's property: the sanitizer build is not optimised for it).
if(CMAKE_BUILD_TYPE STREQUAL "Release" AND NOT GRIT_SANITIZE)
  add_test(NAME unit.vectorized
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/unit/tensor/vectorized.sh $<TARGET_FILE:grit>)
  set_tests_properties(unit.vectorized PROPERTIES TIMEOUT 60 LABELS "unit")
endif()

# Parity against the PyTorch reference: three GPT-NeoX variants; Llama with GQA and
# llama3 rope scaling at theta 500000, Llama tied (with q/k/v biases); Falcon 7B-style
# multi-query with one norm, Falcon 40B-style new_decoder_architecture with two norms
# (tests/reference/decoder_ref.py).
foreach(variant pythia14m rotary_full sequential llama_gqa llama_tied falcon_mq falcon_new)
  add_test(NAME reference.parity.${variant}
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/run_parity.sh
            $<TARGET_FILE:grit-parity-dump> ${GRIT_PYTHON}
            ${CMAKE_SOURCE_DIR}/tests/reference/configs/${variant}.json)
  set_tests_properties(reference.parity.${variant} PROPERTIES TIMEOUT 600 LABELS "reference")
endforeach()
# bf16 parity: step-0 logits, loss and gradients of "precision": "bf16" against PyTorch's
# CPU bf16 autocast (tests/reference/compare_bf16.py, tolerances in docs/precision.md), per
# family; the same through the fp32-widening GEMM path (CPUs without AVX512-BF16); and
# the planted bf16-accumulation bug (GRIT_FAULT_BF16_ACCUM=1), which must fail the check.
foreach(variant tiny llama_gqa falcon_new)
  add_test(NAME reference.parity_bf16.${variant}
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/run_parity_bf16.sh
            $<TARGET_FILE:grit-parity-dump> ${GRIT_PYTHON}
            ${CMAKE_SOURCE_DIR}/tests/reference/configs/${variant}.json)
  set_tests_properties(reference.parity_bf16.${variant} PROPERTIES TIMEOUT 300 LABELS "reference")
endforeach()
add_test(NAME reference.parity_bf16.tiny_fp32_gemm
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/run_parity_bf16.sh
          $<TARGET_FILE:grit-parity-dump> ${GRIT_PYTHON}
          ${CMAKE_SOURCE_DIR}/tests/reference/configs/tiny.json)
set_tests_properties(reference.parity_bf16.tiny_fp32_gemm PROPERTIES TIMEOUT 300
                     LABELS "reference" ENVIRONMENT "GRIT_BF16_GEMM=fp32")
add_test(NAME reference.parity_bf16.planted_accum
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/run_parity_bf16.sh
          $<TARGET_FILE:grit-parity-dump> ${GRIT_PYTHON}
          ${CMAKE_SOURCE_DIR}/tests/reference/configs/tiny.json planted)
set_tests_properties(reference.parity_bf16.planted_accum PROPERTIES TIMEOUT 300 LABELS "reference")
# The parity rule must judge grit, not the BLAS kernel: a small variant under every OpenBLAS
# x86-64 core type this CPU runs; and it must stay strict: a planted one-ulp-per-step AdamW
# defect must be rejected (docs/parity.md).
add_test(NAME reference.parity.blas_coretypes
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/run_coretypes.sh
          $<TARGET_FILE:grit-parity-dump> ${GRIT_PYTHON}
          ${CMAKE_SOURCE_DIR}/tests/reference/configs/tiny.json)
set_tests_properties(reference.parity.blas_coretypes PROPERTIES TIMEOUT 600 LABELS "reference"
  SKIP_RETURN_CODE 77)
add_test(NAME reference.parity.planted_adam_ulp
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/run_planted.sh
          $<TARGET_FILE:grit-parity-dump> ${GRIT_PYTHON}
          ${CMAKE_SOURCE_DIR}/tests/reference/configs/tiny.json)
set_tests_properties(reference.parity.planted_adam_ulp PROPERTIES TIMEOUT 600 LABELS "reference")
add_test(NAME reference.checker_selftest
  COMMAND ${GRIT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/compare.py --self-test)
set_tests_properties(reference.checker_selftest PROPERTIES TIMEOUT 600 LABELS "reference")

add_test(NAME integration.determinism
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/determinism.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.determinism PROPERTIES TIMEOUT 300 LABELS "integration;san")
# The OpenMP wait policy grit sets (core/ompenv.h) is the one libgomp runs under, a user's
# OMP_WAIT_POLICY stands, and no policy changes a bit of the results.
add_test(NAME integration.omp_policy
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/omp_policy.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.omp_policy PROPERTIES TIMEOUT 300 LABELS "integration;san")
# Llama and Falcon: determinism, another seed differs, kill + resume bitwise equal.
add_test(NAME integration.family_resume
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/family_resume.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.family_resume PROPERTIES TIMEOUT 400 LABELS "integration")
# bf16 mixed precision (docs/precision.md): determinism and kill/resume bitwise with the
# CPU's bf16 GEMM backend and with the fp32-widening fallback; fp32 master weights.
add_test(NAME integration.bf16_resume
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/bf16_resume.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.bf16_resume PROPERTIES TIMEOUT 400 LABELS "integration")
# The bf16 accuracy guard: 300 steps in fp32 and bf16, the bf16 loss curve within a band
# of the fp32 one (GPT-NeoX and Llama); with GRIT_FAULT_BF16_ACCUM=1 (bf16 GEMMs that
# accumulate in bf16) it must leave the band.
add_executable(grit-bf16-curve tests/integration/bf16_curve.c)
target_link_libraries(grit-bf16-curve PRIVATE gritcore)
foreach(fam neox llama)
  add_test(NAME integration.bf16_curve_${fam} COMMAND grit-bf16-curve 300 --family ${fam})
  set_tests_properties(integration.bf16_curve_${fam} PROPERTIES TIMEOUT 300 LABELS "integration"
                       ENVIRONMENT "GRIT_FAULT_BF16_ACCUM=")
endforeach()
add_test(NAME integration.bf16_curve_planted
  COMMAND grit-bf16-curve 300 --expect-outside)
set_tests_properties(integration.bf16_curve_planted PROPERTIES TIMEOUT 300 LABELS "integration"
                     ENVIRONMENT "GRIT_FAULT_BF16_ACCUM=1")

add_test(NAME integration.config_errors
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/config_errors.sh $<TARGET_FILE:grit>
          ${CMAKE_SOURCE_DIR}/tests/configs/bad)
set_tests_properties(integration.config_errors PROPERTIES TIMEOUT 120 LABELS "integration;san")

add_test(NAME integration.cli_help
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/cli_help.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.cli_help PROPERTIES TIMEOUT 60 LABELS "integration;san")

# Tokenizer parity (src/data/bpe): grit's ids vs npm tiktoken (GPT-2) and
# Hugging Face tokenizers (GPT-NeoX-20B). See tests/tok/run_parity.sh.
add_executable(grit-tok-check tests/tok/tok_check.c)
target_link_libraries(grit-tok-check PRIVATE gritcore)
add_test(NAME reference.tokenizer_parity
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/tok/run_parity.sh $<TARGET_FILE:grit-tok-check>
          400000 ${CMAKE_BINARY_DIR}/tok-parity)
set_tests_properties(reference.tokenizer_parity PROPERTIES TIMEOUT 300 LABELS "reference")
add_test(NAME reference.tokenizer_parity_20mb
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/tok/run_parity.sh $<TARGET_FILE:grit-tok-check>
          3000000 ${CMAKE_BINARY_DIR}/tok-parity-20mb)
set_tests_properties(reference.tokenizer_parity_20mb PROPERTIES TIMEOUT 900 LABELS "reference;slow")

# Generic tokenizers (src/data/hftok*, spm.cc): any tokenizer.json vs Hugging
# Face tokenizers' Rust core (Llama 2, Llama 3, NeoX forced generic, Falcon's
# and the Metaspace pre-tokenizers), SentencePiece .model files vs spm_encode
# and Python sentencepiece, and broken files refused with the field named.
add_test(NAME reference.tokenizer_hf_parity
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/tok/run_hf_parity.sh $<TARGET_FILE:grit-tok-check>
          400000 ${CMAKE_BINARY_DIR}/tok-hf-parity $<TARGET_FILE:grit>)
set_tests_properties(reference.tokenizer_hf_parity PROPERTIES TIMEOUT 600 LABELS "reference")
add_test(NAME reference.tokenizer_spm
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/tok/run_spm.sh $<TARGET_FILE:grit-tok-check> ${GRIT_PYTHON}
          ${CMAKE_BINARY_DIR}/tok-spm)
set_tests_properties(reference.tokenizer_spm PROPERTIES TIMEOUT 300 LABELS "reference" SKIP_RETURN_CODE 77)
add_test(NAME integration.tokenizer_bad_files
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/tok/run_bad_files.sh $<TARGET_FILE:grit> ${CMAKE_BINARY_DIR}/tok-bad-files)
set_tests_properties(integration.tokenizer_bad_files PROPERTIES TIMEOUT 120 LABELS "integration;san")

# Indexed dataset (src/data/indexed) vs Megatron's numpy code path.
add_executable(grit-idx-tool tests/reference/idx_tool.c)
target_link_libraries(grit-idx-tool PRIVATE gritcore)
add_test(NAME reference.indexed_megatron
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/run_indexed.sh $<TARGET_FILE:grit-idx-tool>
          ${GRIT_PYTHON} ${CMAKE_BINARY_DIR}/indexed-ref)
set_tests_properties(reference.indexed_megatron PROPERTIES TIMEOUT 300 LABELS "reference")

# Checkpoints (src/ckpt): crash at every commit phase and inside file writes, corruption
# of every file kind, a full disk; HF interoperability against the PyTorch reference.
foreach(t ckpt_crash ckpt_corrupt ckpt_enospc)
  add_test(NAME integration.${t}
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/${t}.sh $<TARGET_FILE:grit>)
  set_tests_properties(integration.${t} PROPERTIES TIMEOUT 300 LABELS "integration")
endforeach()
set_tests_properties(integration.ckpt_corrupt integration.ckpt_enospc PROPERTIES LABELS "integration;san")
add_test(NAME reference.ckpt_hf
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/ckpt_hf.sh $<TARGET_FILE:grit>
          $<TARGET_FILE:grit-parity-dump> ${GRIT_PYTHON})
set_tests_properties(reference.ckpt_hf PROPERTIES TIMEOUT 300 LABELS "reference")
# Llama and Falcon Hugging Face folders (sharded, F32/F16/BF16) in and out.
add_test(NAME reference.hf_family
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/hf_family.sh $<TARGET_FILE:grit>
          $<TARGET_FILE:grit-parity-dump> ${GRIT_PYTHON})
set_tests_properties(reference.hf_family PROPERTIES TIMEOUT 300 LABELS "reference")

add_test(NAME integration.health
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/health.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.health PROPERTIES TIMEOUT 300 LABELS "integration;san")

# Data parallel over real MPI ranks (src/dist, src/train/dp): DP=1/2/4 agreement, bitwise
# DP=2, ZeRO-1, resume across world sizes, a killed rank.
add_test(NAME integration.dp
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/dp.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.dp PROPERTIES TIMEOUT 300 LABELS "integration;mpi" RUN_SERIAL TRUE)
# Tensor parallelism (src/model/tp.c, src/comm/grid.c): TP=2 and TP=2 x DP=2 against one
# rank for GPT-NeoX and Llama-GQA shapes, bitwise run to run, refused layouts.
add_test(NAME integration.tp
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/tp.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.tp PROPERTIES TIMEOUT 600 LABELS "integration;mpi" RUN_SERIAL TRUE)
# Sequence parallelism (model/tp.h): GPT-NeoX, Llama, Falcon at TP=2 against one rank,
# bitwise plain TP at step 1, deterministic and resumed bitwise, with PP + recompute and
# DP + ZeRO-1, the tensor group's bytes against the analytic payload, refusals.
add_test(NAME integration.sp
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/sp.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.sp PROPERTIES TIMEOUT 300 LABELS "integration;mpi" RUN_SERIAL TRUE)
# Pipeline parallelism (src/train/pipeline.c): the 1F1B schedule over 2 and 4 MPI ranks,
# bitwise the single rank's gradient accumulation, and a hung stage found by the deadline.
add_executable(grit-pp-check tests/integration/pp_check.c)
target_link_libraries(grit-pp-check PRIVATE gritcore)
add_test(NAME integration.pipeline
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/pipeline.sh $<TARGET_FILE:grit-pp-check>)
set_tests_properties(integration.pipeline PROPERTIES TIMEOUT 300 LABELS "integration;mpi" RUN_SERIAL TRUE)
# Checkpoints under TP hold whole tensors: saves change nothing, TP=2 resumes bitwise, TP=2
# <-> TP=1 <-> TP=2 x DP=2 ZeRO-1 resume each other, init_from at TP=2, SIGTERM to one rank
# of TP=2 x DP=2 stops all at one step and the rerun is bitwise equal.
add_test(NAME integration.tp_ckpt
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/tp_ckpt.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.tp_ckpt PROPERTIES TIMEOUT 600 LABELS "integration;mpi" RUN_SERIAL TRUE)

# Megatron sample order (src/data/gptdataset, mt19937) vs numpy building the same indices.
add_executable(grit-gptidx-tool tests/reference/gptidx_tool.c)
target_link_libraries(grit-gptidx-tool PRIVATE gritcore)
add_test(NAME reference.gpt_index
  COMMAND ${GRIT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/gpt_index_ref.py
          $<TARGET_FILE:grit-gptidx-tool> ${CMAKE_BINARY_DIR}/gpt-index-ref)
set_tests_properties(reference.gpt_index PROPERTIES TIMEOUT 300 LABELS "reference")

# grit tokenize end to end (src/data/tokenize, src/cli/cmd_tokenize.c).
add_test(NAME integration.tokenize
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/tokenize.sh $<TARGET_FILE:grit>
          $<TARGET_FILE:grit-tok-check> ${GRIT_PYTHON}
          ${CMAKE_SOURCE_DIR}/tests/data/gpt-neox-20b-tokenizer.json)
set_tests_properties(integration.tokenize PROPERTIES TIMEOUT 300 LABELS "integration;san")

# Training on tokenized .bin/.idx data: crash and resume end bitwise equal (src/train/data).
add_test(NAME integration.train_megatron
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/train_megatron.sh $<TARGET_FILE:grit>
          ${GRIT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/data/gpt-neox-20b-tokenizer.json)
set_tests_properties(integration.train_megatron PROPERTIES TIMEOUT 300 LABELS "integration")

# grit generate from a trained checkpoint (src/model/gptneox_infer, src/cli/cmd_generate.c).
add_test(NAME integration.generate
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/generate.sh $<TARGET_FILE:grit>
          ${CMAKE_SOURCE_DIR}/tests/data/gpt-neox-20b-tokenizer.json)
set_tests_properties(integration.generate PROPERTIES TIMEOUT 300 LABELS "integration")

# grit rate (src/rate): init/batch on a tiny model, two raters in Chromium (keyboard only),
# kill -9 of the server mid-session, webhooks, results and exports against Python.
add_test(NAME integration.rate
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/rate.sh $<TARGET_FILE:grit> ${GRIT_PYTHON}
          ${CMAKE_SOURCE_DIR}/tests/data/gpt-neox-20b-tokenizer.json)
set_tests_properties(integration.rate PROPERTIES TIMEOUT 180 LABELS "integration;browser")
# grit rate watch: a batch per new checkpoint of a run (held back, renamed in, corrupt), webhook,
# restart without repeats, SIGTERM between polls.
add_test(NAME integration.rate_watch
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/rate_watch.sh $<TARGET_FILE:grit>
          ${CMAKE_SOURCE_DIR}/tests/data/gpt-neox-20b-tokenizer.json)
set_tests_properties(integration.rate_watch PROPERTIES TIMEOUT 120 LABELS "integration")

# grit launch (src/supervise): every fault kind recovered without a person, bitwise equal
# to the fault-free run; forged heartbeats; a killed supervisor; a non-grit program.
add_test(NAME integration.launch
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/launch.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.launch PROPERTIES TIMEOUT 600 LABELS "integration;mpi" RUN_SERIAL TRUE)

# SIGTERM/SIGINT to grit train and grit launch: graceful stop, final checkpoint, exit 143/130,
# a second signal at once; the reruns bitwise equal (tests/integration/sigterm.sh)
add_test(NAME integration.sigterm
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/sigterm.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.sigterm PROPERTIES TIMEOUT 400 LABELS "integration;mpi")

# several ranks on several nodes killed at once; the supervisor killed and rerun (the
# durable ledger: incidents, restarts, goodput over the whole run, checkpoint rejections)
add_test(NAME integration.shrink
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/shrink.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.shrink PROPERTIES TIMEOUT 300 LABELS "integration;mpi")
add_test(NAME integration.multi_death
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/multi_death.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.multi_death PROPERTIES TIMEOUT 400 LABELS "integration;mpi")

# failure classes: a full disk (on_error stop) and a config error end the run at once
# (exit 3, the cause in the summary); a killed rank is still retried
add_test(NAME integration.failure_class
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/failure_class.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.failure_class PROPERTIES TIMEOUT 300 LABELS "integration;mpi")

# a flood of forged heartbeats: counted, logged at 1/s, the run unharmed
add_test(NAME integration.hb_flood
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/hb_flood.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.hb_flood PROPERTIES TIMEOUT 180 LABELS "integration;mpi" RUN_SERIAL TRUE)
# The supervisor flags a validation spike (event, warning, summary) and does nothing else.
add_test(NAME integration.val_spike
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/val_spike.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.val_spike PROPERTIES TIMEOUT 180 LABELS "integration;mpi")
# Ranks that finish at different times are not a hang (the finishing timeout); a stuck one is.
add_test(NAME integration.finishing
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/finishing.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.finishing PROPERTIES TIMEOUT 180 LABELS "integration;mpi")
# Silent slowdowns (src/supervise/silent.h): a healthy and a loaded-host run raise no
# utilisation alarm. The throttled node that must be found (a CPU cgroup, replaced, bitwise
# equal) is integration.slurm.throttle; this script's throttled run is bench/silent.sh's
# (GRIT_SILENT_BENCH=1). About 1.5 minutes on a loaded 2-core host.
add_test(NAME integration.silent_cpu
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/silent_cpu.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
# It was disabled once: on an idle host the throttled rank went unseen (its peer slept in
# the all-reduce, so both utils sank; the quota throttles in bursts, so the median step did
# not move). The detector now judges util per compute share and the mean step time per tick
# (unit.test_silent test_waiting_peer_bursty_quota replays that trace).
set_tests_properties(integration.silent_cpu PROPERTIES TIMEOUT 480
  LABELS "integration;mpi;cgroup" RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
# ... and the network detector: four nodes in network namespaces the test creates and
# removes (veths on a bridge, MPI over TCP only); the healthy run raises no alarm. The slow
# link that must be found is integration.slurm.slow_link; this script's is bench/silent.sh's.
add_test(NAME integration.silent_net
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/silent_net.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.silent_net PROPERTIES TIMEOUT 480
  LABELS "integration;mpi;netns" RUN_SERIAL TRUE SKIP_RETURN_CODE 77)

# The supervisor at scale (src/supervise, tests/integration/sup_scale.c): 4,096 ranks on 512
# nodes + 2 spares, heartbeats from one sender process over real UDP; a node dies, is
# diagnosed, cordoned, a spare takes its place; 300 incidents all kept. The same binary is
# the CPU bench (bench/supervisor_scale.sh).
add_executable(grit-sup-scale tests/integration/sup_scale.c)
target_link_libraries(grit-sup-scale PRIVATE gritcore)
add_test(NAME integration.sup_scale COMMAND grit-sup-scale)
set_tests_properties(integration.sup_scale PROPERTIES TIMEOUT 300 LABELS "integration" RUN_SERIAL TRUE)

# grit health across MPI ranks (src/health/network.c, src/dist point-to-point): the
# all-reduce sweep and pairwise ping-pong on 2 and 3 ranks, injected slow link and
# corrupted all-reduce named by rank/pair, merged verdicts, a hung peer.
add_test(NAME integration.health_mpi
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/health_mpi.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.health_mpi PROPERTIES TIMEOUT 300 LABELS "integration;mpi" RUN_SERIAL TRUE)

# A stand-in libnvidia-ml (tests/fake/fake_nvml.c) that stages GPUs, Xid events, power
# and energy for the GPU check's and power sampling's tests on machines without a GPU: test_gpu loads it by path, and
# integration.health_gpu runs grit health --deep against it.
add_library(grit-fake-nvml SHARED tests/fake/fake_nvml.c)
# test_power_nvml stages GPU power and energy counters through it, test_hb_gpu GPU
# utilisation and SM clocks (the heartbeat's gpu_util=/sm_clock=).
foreach(t test_gpu test_power_nvml test_hb_gpu)
  target_compile_definitions(${t} PRIVATE GRIT_FAKE_NVML="$<TARGET_FILE:grit-fake-nvml>")
  add_dependencies(${t} grit-fake-nvml)
endforeach()
# A GPU that slows (the stand-in NVML's utilisation and SM clock files drop) on a node whose
# rank a CPU cgroup slows for real: a "utilisation" incident naming node1 and its gpu_util
# and sm_clock, its health check recorded, node1 replaced, bitwise equal to the fault-free
# run, which raises no alarm on noisy healthy GPUs. Skips (77, loudly) without a writable
# CPU cgroup. About 1.5-2 minutes on a loaded 2-core host.
add_test(NAME integration.silent_gpu
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/silent_gpu.sh $<TARGET_FILE:grit> ${GRIT_PYTHON}
          $<TARGET_FILE:grit-fake-nvml>)
set_tests_properties(integration.silent_gpu PROPERTIES TIMEOUT 300
  LABELS "integration;mpi;cgroup" RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
add_test(NAME integration.health_gpu
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/health_gpu.sh $<TARGET_FILE:grit>
          $<TARGET_FILE:grit-fake-nvml>)
set_tests_properties(integration.health_gpu PROPERTIES TIMEOUT 120 LABELS "integration;san")
# observability (src/obs): TensorBoard files decoded by the test's own reader, a real
# Prometheus scraping /metrics, headless Chromium checking the dashboard (screenshot in
# build/artifacts/dashboard.png). Each runs a seconds-long grit launch with a node killed.
add_test(NAME integration.obs_tensorboard
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/obs_tensorboard.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
add_test(NAME integration.obs_prometheus
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/obs_prometheus.sh $<TARGET_FILE:grit> ${GRIT_PYTHON}
          $<TARGET_FILE:grit-fake-nvml>)
add_test(NAME integration.obs_browser
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/obs_browser.sh $<TARGET_FILE:grit> ${GRIT_PYTHON}
          ${CMAKE_BINARY_DIR}/artifacts)
set_tests_properties(integration.obs_tensorboard integration.obs_prometheus integration.obs_browser
  PROPERTIES TIMEOUT 180 LABELS "integration;mpi")
set_tests_properties(integration.obs_browser PROPERTIES LABELS "integration;mpi;browser")
# malformed safetensors and WARC headers: a clear error, no leak (LeakSanitizer in build-san)
add_test(NAME integration.error_paths
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/error_paths.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.error_paths PROPERTIES TIMEOUT 120 LABELS "integration;san")
# grit eval: logits, perplexity, multiple choice and cloze against the PyTorch reference
add_test(NAME reference.eval
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/eval.sh $<TARGET_FILE:grit> ${GRIT_PYTHON}
          ${CMAKE_SOURCE_DIR}/tests/data/gpt-neox-20b-tokenizer.json)
set_tests_properties(reference.eval PROPERTIES TIMEOUT 300 LABELS "reference")
# the dashboard server under 300 slow or silent clients (deadlines no trickle extends)
add_test(NAME integration.obs_slow_clients
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/obs_slow_clients.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.obs_slow_clients PROPERTIES TIMEOUT 60 LABELS "integration;san")
# grit prep (src/prep): the synthetic-crawl drop audit and kill/resume.
add_test(NAME integration.prep_warc
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/prep_warc.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.prep_warc PROPERTIES TIMEOUT 120 LABELS "integration;san")
add_test(NAME integration.prep_resume
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/prep_resume.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.prep_resume PROPERTIES TIMEOUT 300 LABELS "integration")
add_test(NAME integration.prep_tokenize_idx
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/prep_tokenize_idx.sh $<TARGET_FILE:grit>
          ${GRIT_PYTHON})
set_tests_properties(integration.prep_tokenize_idx PROPERTIES TIMEOUT 300 LABELS "integration")
# grit prep reading s3:// inputs from a real S3 server (s3_lib.sh: Swift): same bytes as the
# local copy (1 process, 2 ranks), 403, a truncated WARC.gz, an object replaced mid-run.
add_test(NAME integration.prep_s3
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/prep_s3.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.prep_s3 PROPERTIES TIMEOUT 300 LABELS "integration;s3;mpi"
  SKIP_RETURN_CODE 77)
# grit prep URL block-list stage (domains, URLs, allow-list, strict/hard/soft words).
add_test(NAME integration.prep_urlfilter
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/prep_urlfilter.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.prep_urlfilter PROPERTIES TIMEOUT 60 LABELS "integration;san")
# grit prep data mix: per-source tokens after dedup, curated/web ratio, data_mix.json for data.weights.
add_test(NAME integration.prep_mix
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/prep_mix.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.prep_mix PROPERTIES TIMEOUT 120 LABELS "integration")
# grit prep language ID: CLD2's full table vs its small one on text in 100+ languages.
add_test(NAME integration.prep_langid
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/prep_langid.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.prep_langid PROPERTIES TIMEOUT 120 LABELS "integration")
# grit prep over MPI ranks: 1/2/4 ranks byte-identical, planted duplicates across ranks,
# a rank dying at any stage and a rerun on any number of ranks converge.
add_test(NAME integration.prep_dist
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/prep_dist.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.prep_dist PROPERTIES TIMEOUT 300 LABELS "integration;mpi"
  SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
# s3:// checkpoints (src/s3, src/ckpt/store_s3.c) against a real S3 server each test starts
# on loopback (scripts/s3-local.sh: OpenStack Swift's S3 API): save/resume bitwise, kills at
# every commit phase, awscli interoperability, truncation; wrong secret, 5xx, killed server.
# Exit 77 (skipped) when Swift or awscli is not installed.
add_test(NAME integration.s3_ckpt
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/s3_ckpt.sh $<TARGET_FILE:grit>)
add_test(NAME integration.s3_faults
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/s3_faults.sh $<TARGET_FILE:grit> /usr/bin/python3)
set_tests_properties(integration.s3_ckpt integration.s3_faults PROPERTIES
  TIMEOUT 300 LABELS "integration;s3" SKIP_RETURN_CODE 77)
# Slurm (scripts/slurm-local-cluster.sh, spank_grit.so, grit launch --backend slurm): each
# test starts its own 4-node cluster on fixed ports, so they run serially. Exit 77: skipped
# (not root, no Slurm, no namespaces, or no SPANK plugin), said loudly in the output.
# throttle: a node slowed by a CPU cgroup (the Slurm variant of silent_cpu; also 77 where
# no CPU cgroup can be written); slow_link: a node's link limited with tc tbf, found as a
# "network" incident (netns cluster); grid: a TP=2 x PP=2 job on 5 nodes (4 + a spare)
# loses a node, the spare takes its grid coordinates.
foreach(scenario options kill grid freeze health requeue partition remote_hb throttle slow_link)
  add_test(NAME integration.slurm.${scenario}
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/slurm.sh $<TARGET_FILE:grit>
            ${CMAKE_BINARY_DIR}/spank_grit.so ${scenario} $<TARGET_FILE:grit-fake-nvml>)
  set_tests_properties(integration.slurm.${scenario} PROPERTIES TIMEOUT 240
    LABELS "integration;slurm" RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endforeach()
# grit cluster (src/cluster, local provider): each scenario makes its own cluster of
# network-namespace hosts on a private bridge (gcltest0, 10.79.60.0/24) with real Slurm,
# so they run serially. Exit 77: skipped (not root, no Slurm, no namespaces), said loudly.
foreach(scenario lifecycle resume scale heal mpi spare)
  add_test(NAME integration.cluster.${scenario}
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/cluster.sh $<TARGET_FILE:grit> ${scenario})
  set_tests_properties(integration.cluster.${scenario} PROPERTIES TIMEOUT 600
    LABELS "integration;cluster" RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endforeach()
# The ssh provider: three sshd hosts the test makes in network namespaces (gclssh0,
# 10.79.62.0/24, Slurm ports 18600-18601), reached only with ssh/scp, key and known_hosts.
add_test(NAME integration.cluster.ssh
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/cluster_ssh.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.cluster.ssh PROPERTIES TIMEOUT 300
  LABELS "integration;cluster" RUN_SERIAL TRUE SKIP_RETURN_CODE 77)

# PyTorch jobs (python/grit_client.py, examples/pytorch/train_ddp.py, docs/pytorch.md): the
# client's unit tests (its lines through grit's own parser, hb_parse, via grit-hb-parse; the
# secret; a supervisor that is down; no environment, no work; atomic checkpoints; a real grit
# launch), and the DDP example under grit launch + torchrun surviving an injected dead node,
# a rank killed from outside and a rank frozen with SIGSTOP, ending bitwise equal to the
# fault-free run. Exit 77 (skipped, said loudly) without torch or mpirun.
add_executable(grit-hb-parse tests/python/hb_parse_tool.c)
target_link_libraries(grit-hb-parse PRIVATE gritcore)
add_test(NAME unit.pyclient
  COMMAND ${GRIT_PYTHON} test_grit_client.py
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}/tests/python)
set_tests_properties(unit.pyclient PROPERTIES TIMEOUT 120 LABELS "unit;pytorch"
  SKIP_RETURN_CODE 77
  ENVIRONMENT "GRIT_HB_PARSE=$<TARGET_FILE:grit-hb-parse>;GRIT_BIN=$<TARGET_FILE:grit>;PYTHONPATH=${CMAKE_SOURCE_DIR}/python;GRIT_FAKE_NVML=$<TARGET_FILE:grit-fake-nvml>")
add_dependencies(grit-hb-parse grit-fake-nvml) # the client's GPU signal is tested against it
add_test(NAME integration.pytorch_launch
  COMMAND ${GRIT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/pytorch_launch.py $<TARGET_FILE:grit>)
set_tests_properties(integration.pytorch_launch PROPERTIES TIMEOUT 480
  LABELS "integration;mpi;pytorch" RUN_SERIAL TRUE SKIP_RETURN_CODE 77)

# The same example under Slurm on a 3-node local cluster of its own (ports 18830..; see
# tests/integration/pytorch_slurm.sh): srun --auto-resume=1 through a node crash, grit launch
# --backend slurm through a frozen node. Exit 77 where Slurm cannot run or torch is missing.
foreach(scenario kill freeze)
  add_test(NAME integration.pytorch_slurm.${scenario}
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/pytorch_slurm.sh $<TARGET_FILE:grit>
            ${CMAKE_BINARY_DIR}/spank_grit.so ${scenario})
  set_tests_properties(integration.pytorch_slurm.${scenario} PROPERTIES TIMEOUT 300
    ENVIRONMENT "GRIT_PYTHON=${GRIT_PYTHON}"
    LABELS "integration;slurm;pytorch" RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endforeach()

include(tests/sft.cmake)
# validation during training: no effect on weights, layout-independent, PyTorch reference, resume
add_test(NAME reference.validate
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/validate.sh $<TARGET_FILE:grit> ${GRIT_PYTHON}
          ${CMAKE_SOURCE_DIR}/tests/data/gpt-neox-20b-tokenizer.json)
set_tests_properties(reference.validate PROPERTIES TIMEOUT 300 LABELS "reference;integration;mpi")
# grit serve as a real process on loopback: auth, greedy = grit generate, concurrency, bad
# requests, slow clients, streaming (SSE), chat, metrics histograms, continuous batching (32
# streams = their solo answers, seeded sampling batched, the KV budget on a second server);
# ended by PID (src/serve)
add_test(NAME integration.serve
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/serve.sh $<TARGET_FILE:grit> ${GRIT_PYTHON}
          ${CMAKE_SOURCE_DIR}/tests/data/gpt-neox-20b-tokenizer.json)
set_tests_properties(integration.serve PROPERTIES TIMEOUT 300 LABELS "integration;san")

# grit launch --on-no-spare (a node asked for when the spares ran out: called once, the run
# resumes on it bitwise equal; a failing, slow or garbage-printing command gives up with the
# reason) and --strikes (a node that failed twice is quarantined, kept across a restart)
add_test(NAME integration.no_spare
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/no_spare.sh $<TARGET_FILE:grit> provider)
add_test(NAME integration.strikes
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/no_spare.sh $<TARGET_FILE:grit> strikes)
set_tests_properties(integration.no_spare integration.strikes PROPERTIES TIMEOUT 300
  LABELS "integration;mpi")

# grit-fuzz (tests/fuzz/fuzz.c, docs/testing.md): seeded mutations of configs, safetensors,
# checkpoint manifests, .idx, tokenizer.json, WARC and HTML through the real parsers, in
# process; every input ends in success or an error naming its file, no crash, no hang
# (watchdog per input), and in the sanitizer build no ASan/UBSan report and no leak
# (LeakSanitizer after every input). The regression inputs in tests/fuzz/regress run first.
# Bounded: 60 s of fuzzing in build-san, 20 s in the Release build (where hangs and
# quadratic blow-ups show at full speed); GRIT_FUZZ_SECONDS or --seconds for a longer run.
add_executable(grit-fuzz tests/fuzz/fuzz.c)
target_link_libraries(grit-fuzz PRIVATE gritcore)
target_compile_definitions(grit-fuzz PRIVATE GRIT_FUZZ_SRC="${CMAKE_SOURCE_DIR}")
if(GRIT_SANITIZE)
  add_test(NAME fuzz.smoke COMMAND grit-fuzz --seconds 60 --timeout 30)
  set_tests_properties(fuzz.smoke PROPERTIES TIMEOUT 240 LABELS "unit;san;fuzz")
else()
  add_test(NAME fuzz.smoke COMMAND grit-fuzz --seconds 20 --timeout 10)
  set_tests_properties(fuzz.smoke PROPERTIES TIMEOUT 120 LABELS "unit;fuzz")
endif()

# The reference tests run grit's dump tools and PyTorch, each with OpenMP threads, beside
# another test on 2 cores: libgomp's default barrier wait spins ~300,000 pauses, so the
# spinners took the cores from the threads everyone waited for (reference.parity.sequential
# ran 8 s alone and 109-138 s beside pythia14m; both together 109 s, 27 s with a passive
# wait). A wait policy changes no result. grit itself already waits briefly (core/ompenv.h).
get_property(GRIT_REF_TESTS DIRECTORY PROPERTY TESTS)
foreach(t ${GRIT_REF_TESTS})
  get_test_property(${t} LABELS GRIT_T_LABELS)
  if(GRIT_T_LABELS MATCHES "reference")
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
  endif()
endforeach()

# The sanitizer build: LeakSanitizer on for every test, whatever the caller's environment
# says, so a leak on any tested path (error paths included) fails its test. Keep this last,
# after every add_test (sft.cmake's too).
if(GRIT_SANITIZE)
  get_property(GRIT_ALL_TESTS DIRECTORY PROPERTY TESTS)
  foreach(t ${GRIT_ALL_TESTS})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
      "ASAN_OPTIONS=detect_leaks=1" "UBSAN_OPTIONS=print_stacktrace=1")
  endforeach()
endif()
