// Imports: the front-end step right after the parser (lang/frontend.cpp).
//
//   import std.nn                      // the standard library's nn, as `nn`
//   import std.nn[F64] as nn64         // the same with every F32 made F64
//   import "blocks.tl" as blocks       // a file, relative to the importing file
//
// A module is a .tl file: `std.NAME` is one of the standard library's
// modules, compiled into mlk (std/NAME.tl in the source tree, so they are the
// same on every machine and in every cache key); a string is a path,
// resolved against the directory of the importing file. Each module is first
// compiled on its own (its own imports included); one that does not check
// is an Import error at the import naming its first diagnostic with its
// position in the module. A clean module's fns, records and transforms are
// then added to the importing program under `ALIAS.` (`nn.linear`,
// `nn.Linear`), private (a module's `public` and `tune` are its own), and
// every position in them becomes the import's, so a later diagnostic that
// involves an imported fn points at the import. Calls of imported fns are
// ordinary calls: the callee's IR is part of the caller's content hash
// (lang/ir_printer.h), so a changed module changes the key.
//
// Imports nest up to 16 deep and number at most 256 in one compilation
// (nested ones included: each import of a module merges it again); a
// module is a regular file of at most 16 MiB. A module that imports itself
// (through others), two imports under one name, and an unknown `std.`
// module are Import errors.
#pragma once

#include "lang/ast.h"
#include "lang/diagnostics.h"
#include "lang/source.h"

namespace mlk {

// Resolves and merges every import of `program` (see above). With
// `file_imports` false, importing a file is an Import error at the import
// and only `std.` modules are read: a program compiled on someone else's
// behalf (a measurement worker's source job) reads no file of the machine.
void resolve_imports(const SourceFile& file, ast::Program& program, DiagnosticSink& sink, bool file_imports = true);

// The text of the standard library's module `name` ("std.nn"), or nullptr
// (generated from std/*.tl at build time: lang/std_modules.cpp.in).
const char* std_module_text(const std::string& name);

// The standard library's module names, sorted ("std.nn", ..).
std::vector<std::string> std_module_names();

}  // namespace mlk
