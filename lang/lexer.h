// Lexer: .tl text to tokens. Never fails: bad characters and malformed
// numbers become diagnostics and the lexer moves on, so the parser always sees
// a token stream ending in kEof.
#pragma once

#include <string>
#include <vector>

#include "lang/diagnostics.h"
#include "lang/source.h"

namespace mlk {

enum class Tok {
  kEof, kError, kIdent, kInt, kFloat,
  // keywords
  kFn, kPublic, kLet, kMod, kTensor, kScalar, kTrue, kFalse, kTune, kRecord, kImport, kDType,
  // punctuation
  kLParen, kRParen, kLBracket, kRBracket, kComma, kColon, kAssign, kArrow,
  kPlus, kMinus, kStar, kSlash, kEq, kNe, kLt, kLe, kGt, kGe, kAndAnd, kOrOr, kBang,
  kDot, kLBrace, kRBrace,  // `df.column`, `Schema{..}` (lang/dataframe.h)
  kString,  // `"path.tl"` in an import: printable ASCII on one line, no escapes; text keeps the quotes
};

// How a token kind is named in "expected X, found Y" messages.
const char* tok_name(Tok t);

struct Token {
  Tok kind;
  Span span;
  std::string text;  // the source text of the token
  bool line_start = false;  // the first token on its line
};

std::vector<Token> lex(const SourceFile& file, DiagnosticSink& sink);

}  // namespace mlk
