#include "lang/lexer.h"

#include <cctype>
#include <unordered_map>

#include "lang/dtype.h"

namespace mlk {

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::kEof: return "end of file";
    case Tok::kError: return "an invalid character";
    case Tok::kIdent: return "a name";
    case Tok::kInt: return "an integer";
    case Tok::kFloat: return "a number";
    case Tok::kFn: return "`fn`";
    case Tok::kPublic: return "`public`";
    case Tok::kLet: return "`let`";
    case Tok::kMod: return "`mod`";
    case Tok::kTensor: return "`Tensor`";
    case Tok::kScalar: return "`Scalar`";
    case Tok::kTrue: return "`true`";
    case Tok::kFalse: return "`false`";
    case Tok::kTune: return "`tune`";
    case Tok::kRecord: return "`record`";
    case Tok::kImport: return "`import`";
    case Tok::kString: return "a string";
    case Tok::kDType: return "a dtype";
    case Tok::kLParen: return "`(`";
    case Tok::kRParen: return "`)`";
    case Tok::kLBracket: return "`[`";
    case Tok::kRBracket: return "`]`";
    case Tok::kComma: return "`,`";
    case Tok::kColon: return "`:`";
    case Tok::kAssign: return "`=`";
    case Tok::kArrow: return "`->`";
    case Tok::kPlus: return "`+`";
    case Tok::kMinus: return "`-`";
    case Tok::kStar: return "`*`";
    case Tok::kSlash: return "`/`";
    case Tok::kEq: return "`==`";
    case Tok::kNe: return "`!=`";
    case Tok::kLt: return "`<`";
    case Tok::kLe: return "`<=`";
    case Tok::kGt: return "`>`";
    case Tok::kGe: return "`>=`";
    case Tok::kAndAnd: return "`&&`";
    case Tok::kOrOr: return "`||`";
    case Tok::kBang: return "`!`";
    case Tok::kDot: return "`.`";
    case Tok::kLBrace: return "`{`";
    case Tok::kRBrace: return "`}`";
  }
  return "?";
}

namespace {

Tok keyword_or_ident(const std::string& s) {
  static const std::unordered_map<std::string, Tok> kw = {
      {"fn", Tok::kFn},         {"public", Tok::kPublic}, {"let", Tok::kLet},   {"mod", Tok::kMod},
      {"Tensor", Tok::kTensor}, {"Scalar", Tok::kScalar}, {"true", Tok::kTrue}, {"false", Tok::kFalse},
      {"tune", Tok::kTune},     {"record", Tok::kRecord},
      {"import", Tok::kImport}};
  auto it = kw.find(s);
  if (it != kw.end()) return it->second;
  if (parse_dtype(s)) return Tok::kDType;
  return Tok::kIdent;
}

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::vector<Token> lex(const SourceFile& file, DiagnosticSink& sink) {
  const std::string& s = file.text();
  std::vector<Token> out;
  uint32_t i = 0, n = static_cast<uint32_t>(s.size());
  bool line_start = true;  // no token yet on this line
  auto push = [&](Tok k, uint32_t b, uint32_t e) {
    out.push_back({k, {b, e}, s.substr(b, e - b), line_start});
    line_start = false;
  };
  while (i < n) {
    char c = s[i];
    if (c == '\n') line_start = true;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') { ++i; continue; }
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') ++i;
      continue;
    }
    uint32_t b = i;
    if (ident_start(c)) {
      while (i < n && ident_char(s[i])) ++i;
      push(keyword_or_ident(s.substr(b, i - b)), b, i);
      continue;
    }
    if (digit(c) || (c == '.' && i + 1 < n && digit(s[i + 1]))) {
      bool is_float = false, bad = false;
      while (i < n && digit(s[i])) ++i;
      if (i < n && s[i] == '.') {
        is_float = true;
        ++i;
        while (i < n && digit(s[i])) ++i;
      }
      if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        is_float = true;
        ++i;
        if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
        if (i >= n || !digit(s[i])) bad = true;
        while (i < n && digit(s[i])) ++i;
      }
      // A number running straight into a name (`12ab`) is one malformed literal.
      while (i < n && ident_char(s[i])) { bad = true; ++i; }
      if (bad) {
        sink.error(DiagKind::BadNumber, {b, i}, "malformed number literal `" + s.substr(b, i - b) + "`");
        push(is_float ? Tok::kFloat : Tok::kInt, b, i);
        out.back().text = "0";
        continue;
      }
      push(is_float ? Tok::kFloat : Tok::kInt, b, i);
      continue;
    }
    if (c == '"') {  // a string: printable ASCII up to the closing quote on this line
      uint32_t e = i + 1;
      while (e < n && s[e] != '"' && s[e] != '\n' && s[e] >= 0x20 && s[e] < 0x7f) ++e;
      if (e >= n || s[e] != '"') {
        sink.error(DiagKind::UnexpectedChar, {i, e}, "unterminated string (a string is printable ASCII on one line)");
        push(Tok::kError, i, e);
        i = e;
        continue;
      }
      push(Tok::kString, i, e + 1);
      i = e + 1;
      continue;
    }
    auto two = [&](char next) { return i + 1 < n && s[i + 1] == next; };
    Tok k;
    uint32_t len = 1;
    switch (c) {
      case '(': k = Tok::kLParen; break;
      case ')': k = Tok::kRParen; break;
      case '[': k = Tok::kLBracket; break;
      case ']': k = Tok::kRBracket; break;
      case ',': k = Tok::kComma; break;
      case '.': k = Tok::kDot; break;
      case '{': k = Tok::kLBrace; break;
      case '}': k = Tok::kRBrace; break;
      case ':': k = Tok::kColon; break;
      case '+': k = Tok::kPlus; break;
      case '*': k = Tok::kStar; break;
      case '/': k = Tok::kSlash; break;
      case '-': if (two('>')) { k = Tok::kArrow; len = 2; } else k = Tok::kMinus; break;
      case '=': if (two('=')) { k = Tok::kEq; len = 2; } else k = Tok::kAssign; break;
      case '!': if (two('=')) { k = Tok::kNe; len = 2; } else k = Tok::kBang; break;
      case '<': if (two('=')) { k = Tok::kLe; len = 2; } else k = Tok::kLt; break;
      case '>': if (two('=')) { k = Tok::kGe; len = 2; } else k = Tok::kGt; break;
      case '&':
        if (two('&')) { k = Tok::kAndAnd; len = 2; break; }
        [[fallthrough]];
      case '|':
        if (c == '|' && two('|')) { k = Tok::kOrOr; len = 2; break; }
        [[fallthrough]];
      default: {
        // Skip one whole UTF-8 sequence so the message shows the character.
        uint32_t e = i + 1;
        while (e < n && (static_cast<unsigned char>(s[e]) & 0xC0) == 0x80) ++e;
        sink.error(DiagKind::UnexpectedChar, {i, e}, "unexpected character `" + s.substr(i, e - i) + "`");
        push(Tok::kError, i, e);  // the parser stays silent about it: reported here
        i = e;
        continue;
      }
    }
    push(k, i, i + len);
    i += len;
  }
  // End of file sits right after the last token, so "found end of file"
  // points at the line where something is missing.
  uint32_t eof = out.empty() ? 0 : out.back().span.end;
  push(Tok::kEof, eof, eof);
  return out;
}

}  // namespace mlk
