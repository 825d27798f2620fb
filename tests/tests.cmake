# Tests: each is its own process with a timeout (CTest). Labels:
#   unit, integration, reference (needs /usr/bin/python3 with torch), slow,
#   san (also run in the ASan/UBSan build).
set(GRIT_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch for reference tests")

add_executable(grit-parity-dump tests/reference/parity_dump.c)
target_link_libraries(grit-parity-dump PRIVATE gritcore)

file(GLOB GRIT_UNIT_TESTS CONFIGURE_DEPENDS tests/unit/*/test_*.c)
foreach(src ${GRIT_UNIT_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE gritcore)
  add_test(NAME unit.${name} COMMAND ${name})
  set_tests_properties(unit.${name} PROPERTIES TIMEOUT 120 LABELS "unit;san")
endforeach()

# Parity against the PyTorch reference: three model variants.
foreach(variant pythia14m rotary_full sequential)
  add_test(NAME reference.parity.${variant}
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reference/run_parity.sh
            $<TARGET_FILE:grit-parity-dump> ${GRIT_PYTHON}
            ${CMAKE_SOURCE_DIR}/tests/reference/configs/${variant}.json)
  set_tests_properties(reference.parity.${variant} PROPERTIES TIMEOUT 600 LABELS "reference")
endforeach()
add_test(NAME reference.checker_selftest
  COMMAND ${GRIT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/compare.py --self-test)
set_tests_properties(reference.checker_selftest PROPERTIES TIMEOUT 600 LABELS "reference")

add_test(NAME integration.determinism
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/determinism.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.determinism PROPERTIES TIMEOUT 300 LABELS "integration;san")

add_test(NAME integration.config_errors
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/config_errors.sh $<TARGET_FILE:grit>
          ${CMAKE_SOURCE_DIR}/tests/configs/bad)
set_tests_properties(integration.config_errors PROPERTIES TIMEOUT 120 LABELS "integration;san")

add_test(NAME integration.cli_help
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/cli_help.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.cli_help PROPERTIES TIMEOUT 60 LABELS "integration;san")

add_test(NAME integration.health
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/health.sh $<TARGET_FILE:grit>)
set_tests_properties(integration.health PROPERTIES TIMEOUT 300 LABELS "integration;san")
