# Tests of the mlk binary itself: exit codes, output format, --help.
set(_expect ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect.sh)
function(mlk_cli_test name code regex)
  add_test(NAME cli.${name} COMMAND ${_expect} ${code} ${regex} $<TARGET_FILE:mlk> ${ARGN})
endfunction()
# tests/cli/NAME.sh MLK EXAMPLES WORK, as test cli.NAME.
function(mlk_cli_script name)
  add_test(NAME cli.${name}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/${name}.sh $<TARGET_FILE:mlk> ${CMAKE_SOURCE_DIR}/examples
            ${CMAKE_CURRENT_BINARY_DIR}/cli_${name})
endfunction()

file(GLOB _examples ${CMAKE_SOURCE_DIR}/examples/*.tl)
mlk_cli_test(check_examples 0 "ok, [0-9]+ fns" check ${_examples})
mlk_cli_test(check_bad_file 1
  "bad.tl:3:3: error: `\\*` needs identical shapes.*\n  x \\* w\n  \\^~~~~"
  check ${CMAKE_CURRENT_SOURCE_DIR}/cli/bad.tl)
mlk_cli_test(check_missing_file 1 "cannot read .*nope.tl: No such file or directory" check nope.tl)
mlk_cli_test(check_no_args 2 "no input file" check)
mlk_cli_test(check_bad_option 2 "unknown option `--frobnicate`" check --frobnicate x.tl)
mlk_cli_test(check_emit_ir 0 "%0 = param 0 : Tensor\\[F32, \\[B, S, D\\]\\]" check --emit-ir ${CMAKE_SOURCE_DIR}/examples/norms.tl)
mlk_cli_test(check_hash 0 "[0-9a-f]{64} layernorm" check --hash ${CMAKE_SOURCE_DIR}/examples/norms.tl)
mlk_cli_test(help 0 "commands:\n  bench +time fns.*\n  build +compile.*\n  check +type-check" --help)
mlk_cli_test(no_command 2 "usage: mlk COMMAND" )
mlk_cli_test(unknown_command 2 "unknown command `frob`" frob)
mlk_cli_test(check_help 0 "usage: mlk check FILE.tl" check --help)
mlk_cli_test(version 0 "mlk [0-9]+\\.[0-9]+\\.[0-9]+\nHalide 21\\.[0-9]+\\.[0-9]+\nLLVM [0-9]+" version)
mlk_cli_test(version_args 2 "^mlk version: unexpected argument `extra`\n" version extra)
mlk_cli_test(targets 0 "cuda_sm90 +cuda +(yes|no) +sm_90.*this machine: [0-9]+ cores. CPU features:" targets)
mlk_cli_test(build_needs_target 2 "--target PROFILE is required" build ${CMAKE_SOURCE_DIR}/examples/norms.tl --fn rmsnorm -o x)
mlk_cli_test(build_unknown_target 1 "unknown target profile `cuda_sm99` \\(known: cpu_avx2" build ${CMAKE_SOURCE_DIR}/examples/norms.tl --fn rmsnorm --target cuda_sm99 -o x)
mlk_cli_test(build_host 0 "built .*librmsnorm.so" build ${CMAKE_SOURCE_DIR}/examples/norms.tl --fn rmsnorm --target host -o ${CMAKE_CURRENT_BINARY_DIR}/cli_build_host)
mlk_cli_test(build_private_fn 1 "`gelu_tanh` is not public" build ${CMAKE_SOURCE_DIR}/examples/mlp.tl --fn gelu_tanh --target host -o ${CMAKE_CURRENT_BINARY_DIR}/cli_build_private)
mlk_cli_test(build_bad_schedule_file 1 "cannot read nope.json: No such file or directory" build ${CMAKE_SOURCE_DIR}/examples/norms.tl --fn rmsnorm --target host --schedule nope.json -o x)
mlk_cli_test(tune_needs_target 2 "--target PROFILE is required" tune ${CMAKE_SOURCE_DIR}/examples/mlp.tl)
# Issue 49: the new flags' usage errors.
mlk_cli_test(serve_public_url_not_http 1 "--public-url `ftp://x` is not an http:// or https:// URL"
  serve --cache ${CMAKE_CURRENT_BINARY_DIR}/cli_public_url.db --public-url ftp://x)
mlk_cli_test(serve_max_manifest_small 1 "--max-manifest must be at least 1K"
  serve --cache ${CMAKE_CURRENT_BINARY_DIR}/cli_max_manifest.db --max-manifest 10)
mlk_cli_test(build_trusted_bad_key 1 "--trusted-signers: "
  build ${CMAKE_SOURCE_DIR}/examples/mlp.tl --fn sgemm --target host -o ${CMAKE_CURRENT_BINARY_DIR}/cli_trusted_o --trusted-signers abc)
# Issue 49, finding 12: a GPU winner picked by workers alone is not signed.
mlk_cli_test(tune_sign_workers_gpu 2 "--sign with --workers on `cuda_sm90`, which does not run here .*the winner would rest on the workers' measurements alone"
  tune ${CMAKE_SOURCE_DIR}/examples/mlp.tl --target cuda_sm90 --fn sgemm --workers k --server http://127.0.0.1:9 --sign /nonexistent.pem)
# Issue 49, finding 5: the pack-signing flags' usage errors.
mlk_cli_test(tune_sign_packs_without_workers 2 "--sign-packs signs what is sent to --workers. give --workers KEY"
  tune ${CMAKE_SOURCE_DIR}/examples/mlp.tl --target host --fn sgemm --sign-packs /nonexistent.pem)
mlk_cli_test(worker_bad_trusted_signers 2 "--trusted-signers: trusted key `nonsense` is neither"
  worker --server http://127.0.0.1:9 --device-key k --trusted-signers nonsense)
mlk_cli_test(tune_bad_trials 2 "--trials: `zero` is not a positive integer" tune ${CMAKE_SOURCE_DIR}/examples/mlp.tl --target host --trials zero)
mlk_cli_test(tune_no_bucket 1 "`gelu_tanh` has no `tune` declaration. give its shape with --dims" tune ${CMAKE_SOURCE_DIR}/examples/mlp.tl --target host --fn gelu_tanh --no-cache)
mlk_cli_test(tune_help 0 "usage: mlk tune FILE.tl --target PROFILE" tune --help)
# Dims and params named like C keywords and the wrapper's own names: the winner
# is compiled and built like any other (tests/targets/c_names.tl).
mlk_cli_test(tune_c_names 0 "c_names \\[.*\\] host: [0-9.]+ ms \\(.*, measured, key [0-9a-f]{16}"
  tune ${CMAKE_CURRENT_SOURCE_DIR}/targets/c_names.tl --target host --trials 2 --no-autoschedulers --no-cache -q
  -o ${CMAKE_CURRENT_BINARY_DIR}/cli_tune_c_names)
# --budget: one budget for both kernels of a file, one line per slice, each
# kernel's best-so-far curve, both stored.
mlk_cli_test(tune_budget_program 0
  "\\[tune program\\] 2 of 2 jobs to tune, 6 s of search in all, slices of 5 s.*\\[tune program 2/2\\] rowsum \\[D=72,N=64\\] \\(first slice\\).*ETA.*\\[tune program\\] curve sgemm \\[K=48,M=40,N=32\\]: 10 s [0-9.e-]+ ms, 30 s [0-9.e-]+ ms, 60 s [0-9.e-]+ ms, final [0-9.e-]+ ms at [0-9]+ s. within 5% after [0-9]+ s.*\\[tune program\\] curve rowsum.*\\[tune program\\] 2 of 2 kernels within 5% of their final best after 60 s of their search.*sgemm \\[K=48,M=40,N=32\\] host: [0-9.]+ ms.*rowsum \\[D=72,N=64\\] host: [0-9.]+ ms"
  tune ${CMAKE_CURRENT_SOURCE_DIR}/cli/two_kernels.tl --target host --budget 6 --trials 4 --no-autoschedulers --no-cache)

# Exit status 3: an exception escaping a command (cli/main.cpp; the test seam
# MLK_TEST_THROW=1 throws one) is one line naming the command, not an abort.
add_test(NAME cli.internal_error_exit_3
  COMMAND ${CMAKE_COMMAND} -E env MLK_TEST_THROW=1
          ${_expect} 3 "^mlk check: internal error: MLK_TEST_THROW is set \\(a test of the internal-error path\\) \\(please report this bug"
          $<TARGET_FILE:mlk> check ${CMAKE_SOURCE_DIR}/examples/mlp.tl)
# The other two internal-error routes (base/status.h): a failing MLK_CHECK
# (FILE:LINE, the message and the condition; std::_Exit, no abort), and a
# Status::Internal.
add_test(NAME cli.internal_check_exit_3
  COMMAND ${CMAKE_COMMAND} -E env MLK_TEST_THROW=check
          ${_expect} 3 "^.*cli/main.cpp:[0-9]+: internal error: MLK_TEST_THROW=check \\(a test of the failed-check path\\) \\(route != \"check\"\\); please report this bug"
          $<TARGET_FILE:mlk> check ${CMAKE_SOURCE_DIR}/examples/mlp.tl)
add_test(NAME cli.internal_status_exit_3
  COMMAND ${CMAKE_COMMAND} -E env MLK_TEST_THROW=status
          ${_expect} 3 "^mlk check: internal error: MLK_TEST_THROW=status \\(a test of the internal-status path\\)"
          $<TARGET_FILE:mlk> check ${CMAKE_SOURCE_DIR}/examples/mlp.tl)

# Shapes too large for this machine's memory: refused before allocating, exit 1.
set(_mlp ${CMAKE_SOURCE_DIR}/examples/mlp.tl)
mlk_cli_test(tune_dims_beyond_memory 1
  "mlk tune: --dims K=1000000,M=1000000,N=1000000 needs about 21.8 TiB for the inputs and outputs of `sgemm` \\(2 sets of inputs of 7.3 TiB, 2 results of 3.6 TiB\\). this machine has [0-9.]+ [KMGT]iB of memory. choose smaller dimensions"
  tune ${_mlp} --target host --fn sgemm --dims M=1000000,K=1000000,N=1000000 --no-cache)
mlk_cli_test(tune_dims_overflow_64_bits 1
  "mlk tune: --dims K=99999999999,M=99999999999,N=99999999999 needs more than 8.0 EiB \\(the byte count of a tensor overflows 64 bits\\)"
  tune ${_mlp} --target host --fn sgemm --dims M=99999999999,K=99999999999,N=99999999999 --no-cache)
mlk_cli_test(bench_dims_beyond_memory 1
  "mlk bench: --dims K=1000000,M=1000000,N=1000000 needs about [0-9.]+ TiB for the inputs and outputs of `sgemm`"
  bench ${_mlp} --fn sgemm --target host --dims M=1000000,K=1000000,N=1000000 --no-cache -q)

# Numeric flags: out of range, negative or not a number is a usage error naming the flag.
mlk_cli_test(tune_trials_above_int_max 2 "mlk tune: --trials: `3000000000` is too large \\(at most 2147483647\\)"
  tune ${_mlp} --target host --trials 3000000000)
mlk_cli_test(tune_trials_beyond_64_bits 2 "mlk tune: --trials: `99999999999999999999999` is too large \\(at most 2147483647\\)"
  tune ${_mlp} --target host --trials 99999999999999999999999)
mlk_cli_test(tune_bad_budget 2 "mlk tune: --budget: `0` is not a positive integer" tune ${_mlp} --target host --budget 0)
mlk_cli_test(tune_negative_time 2 "mlk tune: --time: `-5` is not a positive integer" tune ${_mlp} --target host --time -5)
mlk_cli_test(tune_bad_seed 2 "mlk tune: --seed: `abc` is not a positive integer" tune ${_mlp} --target host --seed abc)
mlk_cli_test(tune_fractional_timeout 2 "mlk tune: --timeout: `1.5` is not a positive integer" tune ${_mlp} --target host --timeout 1.5)
mlk_cli_test(run_repeat_too_large 2 "mlk run: --repeat: `99999999999999999999` is too large \\(at most 2147483647\\)"
  run ${_mlp} --inputs x.safetensors --repeat 99999999999999999999)
mlk_cli_test(run_negative_repeat 2 "mlk run: --repeat: `-1` is not a positive integer" run ${_mlp} --inputs x.safetensors --repeat=-1)
# --namespaces LIST (a cache server's read order): its syntax is checked as
# the flag is read, in every command that reads the cache; with a local store
# it is a usage error before anything is opened or created.
mlk_cli_test(run_namespaces_without_own 2
  "mlk run: --namespaces: the read order `alpha` must name `own` \\(where this team writes\\), e.g. own,shared-release"
  run ${_mlp} --inputs x.safetensors --namespaces alpha)
mlk_cli_test(tune_namespaces_own_twice 2 "mlk tune: --namespaces: `own` appears twice in the read order `own,own`"
  tune ${_mlp} --target host --namespaces own,own)
mlk_cli_test(build_namespaces_bad_name 2
  "mlk build: --namespaces: read order `own,a/b`: namespace `a/b` must be 1-64 characters from \\[A-Za-z0-9._-\\]"
  build ${CMAKE_SOURCE_DIR}/examples/norms.tl --fn rmsnorm --target host -o x --namespaces own,a/b)
mlk_cli_test(bench_namespaces_empty_name 2 "mlk bench: --namespaces: read order `,own`: namespace `` must be"
  bench ${_mlp} --namespaces ,own)
mlk_cli_test(verify_namespaces_local_store 2
  "mlk verify: --namespaces: `own,team-a` is a read order of a cache server's namespaces, but the cache is the local store [^ ]*/cli_ns_local.db \\(give --cache http://HOST:PORT, or set .MLK_SERVERS\\)"
  verify ${_mlp} --fn sgemm --target host --dims M=4,K=8,N=4 --cache ${CMAKE_CURRENT_BINARY_DIR}/cli_ns_local.db --namespaces own,team-a)
mlk_cli_test(serve_threads_too_large 2 "mlk serve: --threads: `3000000000` is not a number from 1 to 1024" serve --threads 3000000000)
mlk_cli_test(serve_negative_timeout 2 "mlk serve: --timeout: `-1` is not a positive integer" serve --timeout -1)
mlk_cli_test(serve_store_not_postgres 2 "mlk serve: --store `/x.db` is not a postgresql:// URL \\(a store file is --cache PATH\\)"
  serve --store /x.db)
mlk_cli_test(serve_store_without_blobs 2 "mlk serve: --store needs --blobs s3://BUCKET\\?endpoint=... \\(where the blob bytes live\\)"
  serve --store postgresql://h/db)
mlk_cli_test(serve_blobs_without_store 2 "mlk serve: --blobs and --blob-cache go with --store postgresql://[.]{3}. an SQLite store keeps its blobs itself"
  serve --blobs s3://b)
mlk_cli_test(serve_cache_and_store 2 "mlk serve: give --cache PATH or --store URL, not both" serve --store postgresql://h/d --cache x)
mlk_cli_test(serve_bad_blobs 1 "mlk serve: --blobs `s3://b`: endpoint= must be an http:// or https:// URL"
  serve --store postgresql://h/d --blobs s3://b)
mlk_cli_test(token_grant_needs_team 2 "mlk token: grant needs --team NAME" token grant --namespace a)
mlk_cli_test(token_grant_own_namespace 2 "mlk token: team `a` reads its own namespace without a grant"
  token grant --namespace a --team a --cache ${CMAKE_CURRENT_BINARY_DIR}/cli_grants.db)
mlk_cli_test(token_store_not_postgres 2 "mlk token: --store `/x` is not a postgresql:// URL" token list --store /x)
mlk_cli_test(serve_ttl_too_large 2 "mlk serve: --staged-ttl: `9223372036854775808` is too large \\(at most 2147483647\\)"
  serve --staged-ttl 9223372036854775808)
mlk_cli_test(bench_rounds_too_large 2 "mlk bench: --rounds: `3000000000` is too large \\(at most 2147483647\\)"
  bench ${_mlp} --fn sgemm --target host --rounds 3000000000)
mlk_cli_test(bench_negative_settle 2 "mlk bench: --settle: `-1` is not a whole number of seconds" bench ${_mlp} --fn sgemm --target host --settle -1)
mlk_cli_test(bench_settle_too_large 2 "mlk bench: --settle: `3000000000` is too large" bench ${_mlp} --fn sgemm --target host --settle 3000000000)
mlk_cli_test(bench_bad_min_time 2 "mlk bench: --min-time: `fast` is not a positive integer" bench ${_mlp} --fn sgemm --target host --min-time fast)

# The one parse loop of the flag tables (cli/flags.h) through real commands;
# the loop itself is tested on a small table in tests/cli/flags_test.cpp.
mlk_cli_test(flags_unknown_suggests 2
  "^mlk tune: unknown option `--trails` \\(did you mean `--trials`\\?\\)\n\\(see `mlk tune --help`\\)$"
  tune ${_mlp} --target host --trails 3)
mlk_cli_test(flags_missing_value 2 "^mlk run: --fn needs a value\n" run ${_mlp} --inputs x.safetensors --fn)
mlk_cli_test(flags_value_is_not_a_flag 2 "^mlk build: --fn needs a value\n" build ${_mlp} --fn --target host -o x)
mlk_cli_test(flags_switch_with_value 2 "^mlk build: --no-cache takes no value \\(given `--no-cache=1`\\)\n"
  build ${_mlp} --target host -o x --no-cache=1)
mlk_cli_test(flags_equals_form 2 "^mlk tune: --trials: `zero` is not a positive integer\n" tune ${_mlp} --target=host --trials=zero)
mlk_cli_test(flags_empty_value 2 "^mlk tune: --cache needs a non-empty value\n" tune ${_mlp} --target host --cache=)
# Given twice, the last one wins: the unknown profile is the second.
mlk_cli_test(flags_last_wins 1 "^mlk tune: unknown target profile `cuda_sm99`"
  tune ${_mlp} --target host --target cuda_sm99 --fn sgemm --no-cache)
# A repeatable flag: each --quota is read (the second one is bad).
mlk_cli_test(flags_repeated 2 "^mlk serve: --quota: `12X` is not a size" serve --quota a=1K --quota b=12X)
mlk_cli_test(flags_unexpected_argument 2 "^mlk serve: unexpected argument `extra`\n" serve extra)
mlk_cli_test(flags_belongs_to_subcommand 2 "^mlk cache: --remote belongs to `push` and `pull`\n" cache ls --remote http://x)
mlk_cli_test(flags_subcommand_needs 2 "^mlk token: create needs --scopes LIST \\(e.g. read,write-blobs,write-entries\\)\n"
  token create --team vision)
mlk_cli_test(help_command 0 "^usage: mlk run FILE.tl \\[--fn NAME\\] --inputs IN.safetensors" help run)
mlk_cli_test(help_unknown_command 2 "^mlk help: `frob` is not a command\n\nusage: mlk COMMAND" help frob)

# `mlk verify` (docs/verification.md): a good kernel passes every level, a bad
# level list is a usage error, an injected defect fails with its counterexample.
mlk_cli_test(verify_sgemm 0 "verify sgemm \\[K=8,M=4,N=4\\] host: PASS\n  types: pass.*equivalence: pass.*proved equal"
  verify ${_mlp} --fn sgemm --target host --dims M=4,K=8,N=4 --no-cache)
mlk_cli_test(verify_bad_level 2 "mlk verify: --level: unknown verification level `fast` \\(levels: types, identity, envelope, memory, equivalence. or all, cheap\\)"
  verify ${_mlp} --fn sgemm --target host --dims M=4,K=8,N=4 --level fast)
mlk_cli_test(verify_missing_dim 2 "mlk verify: verification runs at a concrete shape: --dims must give `N` \\(e.g. --dims N=4\\)"
  verify ${_mlp} --fn sgemm --target host --dims M=4,K=8 --no-cache)
add_test(NAME cli.verify_defect_exit_1
  COMMAND ${CMAKE_COMMAND} -E env MLK_TEST_FAULT=transpose_axes
          ${_expect} 1 "equivalence: FAIL .*counterexample: at A=3,B=3,C=3, element \\[0, 0, 1\\] differs: the typed IR computes x\\[9\\], the lowered algorithm x\\[3\\]"
          $<TARGET_FILE:mlk> verify ${CMAKE_CURRENT_SOURCE_DIR}/verify/defects.tl --fn perm3 --target host
          --dims A=3,B=3,C=3 --level equivalence --no-cache)

# Signing (docs/signing.md, issue 28 item 4): keys, `--sign` on build and
# verify; a release namespace nobody is trusted to verify is refused at start.
mlk_cli_script(signing)
# mlk verify --sign: the artifact's code runs in a process that never held
# the verifier's key (a library that scans its process's memory finds nothing).
mlk_cli_script(verify_key_apart)
mlk_cli_script(amx_artifact)
mlk_cli_script(schedule_naive)
# mlk verify --sign in stages: the levels it keeps come from the report it
# checked, never from the copy in the entry's manifest.json (issue 49, review 6).
mlk_cli_script(verify_merge_checked)
# mlk verify of a CUDA artifact without a GPU: levels it cannot run are
# "not run" (exit 4), not stored, and never overwrite an earlier result.
mlk_cli_script(verify_not_run)
# mlk signature: a program's signatures and C ABI as a snapshot, --check
# naming what changed; mlk build's <fn>.h compiled and linked by a C caller.
mlk_cli_script(signature_snapshot)
# mlk tune --require-verified: a cache hit's report counts only when a tune
# here wrote it (issue 49, finding 11).
mlk_cli_script(tune_hit_origin)
mlk_cli_test(serve_release_needs_trusted_verifiers 2
  "mlk serve: --require-verified release=...: a release accepts only reports signed by a trusted verifier"
  serve --require-verified release=all --listen 127.0.0.1:0)
mlk_cli_test(run_require_signed_bad_key 2 "mlk run: --require: trusted key `nonsense` is neither"
  run ${CMAKE_SOURCE_DIR}/examples/mlp.tl --inputs x.safetensors --require signed:nonsense)
mlk_cli_script(signing_release)
set_tests_properties(cli.signing_release PROPERTIES TIMEOUT 180)

# Files another local user could put in place first: a store in a shared
# folder, its STORE.work, a key's .pub (issue 49, reviews 8-11).
mlk_cli_script(shared_folder)
mlk_cli_script(tune_private_work)

# A MiniLM layer of 5 tokens: its rules once vectorised by 5, and Halide 21
# aborted inside LLVM on a predicated load of that width (the process died);
# vector widths are powers of two now (scheduler/rules_common.h, vector_clip).
mlk_cli_test(tune_sign_imported 2 "--sign with --import-measurements: the winner is the library of the measured folder"
  tune ${CMAKE_SOURCE_DIR}/examples/mlp.tl --fn sgemm --target host --dims M=4,K=4,N=4 --import-measurements m.json --sign k.pem)
mlk_cli_test(build_profile_stages_gpu 2 "--profile-stages profiles CPU kernels. cuda_sm90 is a GPU profile"
  build ${CMAKE_SOURCE_DIR}/examples/norms.tl --fn rmsnorm --target cuda_sm90 -o x --profile-stages)
# --profile-stages: Halide's per-stage report at the exit of a process that ran the kernel.
add_test(NAME cli.build_profile_stages
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/build_profile_stages.sh $<TARGET_FILE:mlk> ${CMAKE_SOURCE_DIR}/.venv/bin/python
          ${CMAKE_BINARY_DIR}/python
          ${CMAKE_SOURCE_DIR}/examples ${CMAKE_CURRENT_BINARY_DIR}/cli_build_profile_stages)
mlk_cli_test(build_minilm_layer_5_tokens 0 "built .*liblayer.so"
  build ${CMAKE_SOURCE_DIR}/examples/minilm/minilm.tl --fn layer --target cpu_avx2 --dims B=1,S=5,D=384,H=12,F=1536
  -o ${CMAKE_CURRENT_BINARY_DIR}/cli_build_minilm_layer_5)
