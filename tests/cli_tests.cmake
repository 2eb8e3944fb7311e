# Tests of the mlk binary itself: exit codes, output format, --help.
set(_expect ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect.sh)
function(mlk_cli_test name code regex)
  add_test(NAME cli.${name} COMMAND ${_expect} ${code} ${regex} $<TARGET_FILE:mlk> ${ARGN})
endfunction()

file(GLOB _examples ${CMAKE_SOURCE_DIR}/examples/*.tl)
mlk_cli_test(check_examples 0 "ok, [0-9]+ fns" check ${_examples})
mlk_cli_test(check_bad_file 1
  "bad.tl:3:3: error: `\\*` needs identical shapes.*\n  x \\* w\n  \\^~~~~"
  check ${CMAKE_CURRENT_SOURCE_DIR}/cli/bad.tl)
mlk_cli_test(check_missing_file 1 "cannot read .*nope.tl" check nope.tl)
mlk_cli_test(check_no_args 2 "no input file" check)
mlk_cli_test(check_bad_option 2 "unknown option `--frobnicate`" check --frobnicate x.tl)
mlk_cli_test(check_emit_ir 0 "%0 = param 0 : Tensor\\[F32, \\[B, S, D\\]\\]" check --emit-ir ${CMAKE_SOURCE_DIR}/examples/norms.tl)
mlk_cli_test(check_hash 0 "[0-9a-f]{64} layernorm" check --hash ${CMAKE_SOURCE_DIR}/examples/norms.tl)
mlk_cli_test(help 0 "commands:\n  check +type-check" --help)
mlk_cli_test(no_command 2 "usage: mlk COMMAND" )
mlk_cli_test(unknown_command 2 "unknown command `frob`" frob)
mlk_cli_test(check_help 0 "usage: mlk check FILE.tl" check --help)
mlk_cli_test(version 0 "mlk [0-9]+\\.[0-9]+\\.[0-9]+\nHalide 21\\.[0-9]+\\.[0-9]+\nLLVM [0-9]+" version)
mlk_cli_test(version_args 2 "takes no arguments" version extra)
