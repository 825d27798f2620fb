# Supervised fine-tuning (docs/sft.md): the masked loss, packed examples and their
# gradients against PyTorch (tests/reference/sft_ref.py), per family.
add_executable(grit-sft-dump tests/reference/sft_dump.c)
target_link_libraries(grit-sft-dump PRIVATE gritcore)
foreach(variant tiny llama_gqa llama_tied falcon_mq falcon_new)
  add_test(NAME reference.sft_parity.${variant}
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/run_sft.sh
            $<TARGET_FILE:grit-sft-dump> ${GRIT_PYTHON}
            ${CMAKE_SOURCE_DIR}/tests/reference/configs/${variant}.json)
  set_tests_properties(reference.sft_parity.${variant} PROPERTIES TIMEOUT 300 LABELS "reference")
endforeach()
# The check must fail when packed examples attend to each other (the dump without
# segment starts).
add_test(NAME reference.sft_parity_cross_caught
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/run_sft.sh
          $<TARGET_FILE:grit-sft-dump> ${GRIT_PYTHON}
          ${CMAKE_SOURCE_DIR}/tests/reference/configs/llama_gqa.json --no-seg)
set_tests_properties(reference.sft_parity_cross_caught PROPERTIES TIMEOUT 300 LABELS "reference")
# JSONL -> tokens + loss mask, then fine-tuning from an HF Llama folder under grit launch with
# a kill, resumed bitwise (tests/integration/sft.sh).
add_test(NAME integration.sft
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/sft.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.sft PROPERTIES TIMEOUT 400 LABELS "integration")
# grit generate's KV-cache inference for Llama (GQA) and Falcon (MQA, grouped) vs a PyTorch
# greedy loop on PyTorch-written Hugging Face folders.
add_executable(grit-gen-dump tests/reference/gen_dump.c)
target_link_libraries(grit-gen-dump PRIVATE gritcore)
add_test(NAME reference.generate_family
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/gen_family.sh $<TARGET_FILE:grit>
          $<TARGET_FILE:grit-gen-dump> ${GRIT_PYTHON})
set_tests_properties(reference.generate_family PROPERTIES TIMEOUT 300 LABELS "reference")
# SFT over 2 MPI ranks: the global-batch answer-token mean equals the single-rank run's.
add_test(NAME integration.sft_dp
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/sft_dp.sh $<TARGET_FILE:grit> ${GRIT_PYTHON})
set_tests_properties(integration.sft_dp PROPERTIES TIMEOUT 300 LABELS "integration;mpi" RUN_SERIAL TRUE)
