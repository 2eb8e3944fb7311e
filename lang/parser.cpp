#include "lang/parser.h"

#include <charconv>

namespace mlk {
namespace {

struct SyntaxError {};  // unwinds to the nearest recovery point; already reported

// Bounds on nesting, so that hostile input cannot overflow the stack of the
// parser (recursion) or of later passes (tree height).
constexpr int kMaxRecursion = 200;
constexpr int kMaxTreeHeight = 1000;

class Parser {
 public:
  Parser(const std::vector<Token>& toks, DiagnosticSink& sink) : t_(toks), sink_(sink) {}

  ast::Program program() {
    ast::Program p;
    while (!at(Tok::kEof)) {
      if (at(Tok::kTune)) {
        try {
          p.tunes.push_back(tune());
        } catch (SyntaxError&) {
          skip_to_item();
        }
        continue;
      }
      if (at(Tok::kImport)) {
        try {
          p.imports.push_back(import());
        } catch (SyntaxError&) {
          skip_to_item();
        }
        continue;
      }
      if (at(Tok::kRecord)) {
        try {
          p.records.push_back(record());
        } catch (SyntaxError&) {
          skip_to_item();
        }
        continue;
      }
      if (at_transform()) {
        try {
          p.transforms.push_back(transform());
        } catch (SyntaxError&) {
          skip_to_item();
        }
        continue;
      }
      if (at(Tok::kPublic) || at(Tok::kFn)) {
        p.functions.push_back(function());
        continue;
      }
      try {
        if (at(Tok::kLet)) {  // the seed's sketches bind values at the top level
          sink_.error(DiagKind::Syntax, cur().span,
                      "a `let` at the top level: values are bound by `let` inside a fn's body, before its result; "
                      "a weight is a parameter of the fn that uses it (check one from Python with "
                      "mlk.check, or in the body with `let w : Tensor[..] = w_q`)");
          throw SyntaxError{};
        }
        error_expected("`fn`, `public fn`, `record`, `import` or `tune`");
      } catch (SyntaxError&) {
        advance();  // the stray token itself, then up to the next item
        skip_to_item();
      }
    }
    return p;
  }

 private:
  const Token& cur() const { return t_[pos_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  bool at(Tok k) const { return cur().kind == k; }
  const Token& advance() {
    const Token& tk = t_[pos_];
    if (pos_ + 1 < t_.size()) ++pos_;
    return tk;
  }
  bool accept(Tok k) {
    if (!at(k)) return false;
    advance();
    return true;
  }
  [[noreturn]] void error_expected(const std::string& what) {
    if (at(Tok::kError)) throw SyntaxError{};  // the lexer already reported it
    std::string found = at(Tok::kEof) ? "end of file" : "`" + cur().text + "`";
    sink_.error(DiagKind::Syntax, cur().span, "expected " + what + ", found " + found);
    throw SyntaxError{};
  }
  const Token& expect(Tok k) {
    if (!at(k)) error_expected(tok_name(k));
    return advance();
  }
  bool at_item_start() const {
    return at(Tok::kFn) || at(Tok::kPublic) || at(Tok::kTune) || at(Tok::kRecord) || at(Tok::kImport) ||
           at(Tok::kEof);
  }
  // Skips to the next top-level item; the token that starts it is kept.
  void skip_to_item() {
    while (!at_item_start()) advance();
  }

  ast::Function function() {
    ast::Function f;
    uint32_t begin = cur().span.begin;
    try {
      f.is_public = accept(Tok::kPublic);
      expect(Tok::kFn);
      const Token& name = expect(Tok::kIdent);
      f.name = name.text;
      f.name_span = name.span;
      if (accept(Tok::kLBracket)) {
        if (!at(Tok::kRBracket)) {
          do {
            const Token& d = expect(Tok::kIdent);
            f.dims.emplace_back(d.text, d.span);
          } while (accept(Tok::kComma) && !at(Tok::kRBracket));
        }
        expect(Tok::kRBracket);
      }
      expect(Tok::kLParen);
      while (!at(Tok::kRParen)) {
        ast::Param p;
        const Token& pn = expect(Tok::kIdent);
        p.name = pn.text;
        p.name_span = pn.span;
        expect(Tok::kColon);
        p.type = type(/*param=*/true);
        f.params.push_back(std::move(p));
        if (!accept(Tok::kComma)) break;
      }
      expect(Tok::kRParen);
      expect(Tok::kArrow);
      if (accept(Tok::kLParen)) {  // several results: `-> (T, U, ..)`
        f.result = type();
        while (accept(Tok::kComma) && !at(Tok::kRParen)) f.more_results.push_back(type());
        expect(Tok::kRParen);
        if (f.more_results.empty()) error_expected("`,` and a second result type (a fn with one result is written without parentheses)");
      } else {
        f.result = type();
      }
      expect(Tok::kAssign);
      f.signature_complete = true;
    } catch (SyntaxError&) {
      f.had_syntax_error = true;
      skip_to_item();
      f.span = {begin, cur().span.begin};
      return f;
    }
    // Body: lets, then one expression. Each let is a recovery point.
    while (true) {
      try {
        if (at(Tok::kLet)) {
          f.lets.push_back(let());
          continue;
        }
        f.body = expr();
        no_juxtaposition(*f.body);
        if (!at_item_start() && !at(Tok::kLet)) error_expected("`let`, `fn` or end of file after the result expression");
        if (at(Tok::kLet)) error_expected("the result expression to come after every `let`");
        break;
      } catch (SyntaxError&) {
        f.had_syntax_error = true;
        if (!at_item_start() && !at(Tok::kLet)) advance();
        while (!at_item_start() && !at(Tok::kLet)) advance();
        if (at(Tok::kLet)) continue;
        break;
      }
    }
    f.span = {begin, cur().span.begin};
    return f;
  }

  // `fn NAME (, NAME)* =` (optionally `public`) starts a transform definition.
  bool at_transform() const {
    size_t k = at(Tok::kPublic) ? 1 : 0;
    if (peek(k).kind != Tok::kFn || peek(k + 1).kind != Tok::kIdent) return false;
    Tok after = peek(k + 2).kind;
    return after == Tok::kComma || after == Tok::kAssign;
  }

  // transform := ['public'] 'fn' IDENT (',' IDENT)* '=' IDENT '(' IDENT (',' IDENT '=' expr)* ')'
  ast::Transform transform() {
    ast::Transform t;
    uint32_t begin = cur().span.begin;
    t.is_public = accept(Tok::kPublic);
    expect(Tok::kFn);
    do {
      const Token& n = expect(Tok::kIdent);
      t.names.emplace_back(n.text, n.span);
    } while (accept(Tok::kComma));
    expect(Tok::kAssign);
    const Token& kind = expect(Tok::kIdent);
    t.kind = kind.text;
    t.kind_span = kind.span;
    expect(Tok::kLParen);
    const Token& src = expect(Tok::kIdent);
    t.source = src.text;
    t.source_span = src.span;
    while (accept(Tok::kDot)) {  // a module's fn: `nn.mse`
      t.source += "." + expect(Tok::kIdent).text;
      t.source_span.end = t_[pos_ - 1].span.end;
    }
    while (accept(Tok::kComma) && !at(Tok::kRParen)) {
      if (!(at(Tok::kIdent) && peek().kind == Tok::kAssign)) error_expected("a keyword argument `NAME=...`");
      const Token& kw = advance();
      advance();
      t.keywords.push_back(kw.text);
      t.keyword_spans.push_back(kw.span);
      t.values.push_back(expr());
    }
    t.span = {begin, expect(Tok::kRParen).span.end};
    if (!at_item_start()) error_expected("`fn`, `public fn`, `tune` or end of file after a transform");
    return t;
  }

  // import := 'import' (IDENT ('.' IDENT)* | STRING) ('[' DTYPE ']')? ('as' IDENT)?
  ast::Import import() {
    ast::Import im;
    uint32_t begin = expect(Tok::kImport).span.begin;
    if (at(Tok::kString)) {
      const std::string& t = advance().text;
      im.module = t.substr(1, t.size() - 2);
      im.is_path = true;
    } else {
      im.module = expect(Tok::kIdent).text;
      while (accept(Tok::kDot)) im.module += "." + expect(Tok::kIdent).text;
      im.alias = im.module.substr(im.module.rfind('.') + 1);
    }
    if (accept(Tok::kLBracket)) {
      im.dtype = expect(Tok::kDType).text;
      expect(Tok::kRBracket);
    }
    if (at(Tok::kIdent) && cur().text == "as") {
      advance();
      im.alias = expect(Tok::kIdent).text;
    } else if (im.is_path) {
      error_expected("`as NAME` after an imported file (`import \"" + im.module + "\" as NAME`)");
    }
    im.span = {begin, t_[pos_ - 1].span.end};
    if (!at_item_start()) error_expected("`fn`, `public fn`, `record`, `import`, `tune` or end of file after an import");
    return im;
  }

  // record := 'record' IDENT ('[' IDENT (',' IDENT)* ']')? '{' (IDENT ':' type ','?)* '}'
  ast::Record record() {
    ast::Record r;
    uint32_t begin = expect(Tok::kRecord).span.begin;
    const Token& n = expect(Tok::kIdent);
    r.name = n.text;
    r.name_span = n.span;
    if (accept(Tok::kLBracket)) {
      do {
        const Token& d = expect(Tok::kIdent);
        r.dims.emplace_back(d.text, d.span);
      } while (accept(Tok::kComma) && !at(Tok::kRBracket));
      expect(Tok::kRBracket);
    }
    expect(Tok::kLBrace);
    while (!at(Tok::kRBrace)) {
      ast::Field f;
      const Token& fn = expect(Tok::kIdent);
      f.name = fn.text;
      f.name_span = fn.span;
      expect(Tok::kColon);
      f.type = type(/*param=*/true);
      if (f.type.frame) {
        sink_.error(DiagKind::Syntax, f.type.span, "a field's type is a Tensor, a Scalar, a record or an Array, not a Dataframe");
        throw SyntaxError{};
      }
      r.fields.push_back(std::move(f));
      if (!accept(Tok::kComma)) break;
    }
    r.span = {begin, expect(Tok::kRBrace).span.end};
    if (!at_item_start()) error_expected("`fn`, `public fn`, `record`, `tune` or end of file after a record");
    return r;
  }

  ast::Let let() {
    expect(Tok::kLet);
    ast::Let l;
    const Token& n = expect(Tok::kIdent);
    l.name = n.text;
    l.name_span = n.span;
    if (accept(Tok::kColon)) l.ascription = type();
    expect(Tok::kAssign);
    l.value = expr();
    no_juxtaposition(*l.value, /*in_let=*/true);
    return l;
  }

  // `f x` on one line, a call written without parentheses (as the seed's
  // `check_shape_and_refinement w_q`): said at `x`, with what to write.
  // After a `let`'s value, `x` may be the fn's result on the same line
  // (newlines are not significant): only when more of the body follows on
  // a later line is it a call.
  void no_juxtaposition(const ast::Expr& e, bool in_let = false) {
    if (e.kind != ast::Expr::Kind::kName || cur().line_start ||
        !(at(Tok::kIdent) || at(Tok::kInt) || at(Tok::kFloat)))
      return;
    if (in_let) {
      const Token& next = peek();
      const bool item = next.kind == Tok::kFn || next.kind == Tok::kPublic || next.kind == Tok::kTune ||
                        next.kind == Tok::kRecord || next.kind == Tok::kImport || next.kind == Tok::kEof;
      if (!next.line_start || item) return;
    }
    sink_.error(DiagKind::Syntax, cur().span,
                "`" + e.name + " " + cur().text + "`: a call takes its arguments in parentheses: write `" + e.name +
                    "(" + cur().text + ")`");
    throw SyntaxError{};
  }

  ast::Tune tune() {
    ast::Tune t;
    uint32_t begin = expect(Tok::kTune).span.begin;
    const Token& n = expect(Tok::kIdent);
    t.name = n.text;
    t.name_span = n.span;
    expect(Tok::kLBracket);
    do {
      const Token& d = expect(Tok::kIdent);
      expect(Tok::kAssign);
      const Token& v = expect(Tok::kInt);
      t.dims.emplace_back(d.text, int_value(v));
      t.dim_spans.push_back(Span::merge(d.span, v.span));
    } while (accept(Tok::kComma) && !at(Tok::kRBracket));
    t.span = {begin, expect(Tok::kRBracket).span.end};
    return t;
  }

  long long int_value(const Token& tk) {
    long long v = 0;
    auto [p, ec] = std::from_chars(tk.text.data(), tk.text.data() + tk.text.size(), v);
    if (ec != std::errc() || p != tk.text.data() + tk.text.size() || v > 2147483647LL) {
      sink_.error(DiagKind::LiteralRange, tk.span,
                  "dimension literal `" + tk.text + "` is out of range; dimensions are at most 2147483647");
      throw SyntaxError{};
    }
    return v;
  }

  // `param`: a Dataframe, record or Array type is allowed (parameters and
  // record fields only).
  ast::Type type(bool param = false) {
    ast::Type ty;
    uint32_t begin = cur().span.begin;
    if (at(Tok::kIdent) && cur().text == "Dataframe") {
      if (!param) {
        sink_.error(DiagKind::Syntax, cur().span, "a `Dataframe` type is a parameter's type only");
        throw SyntaxError{};
      }
      return frame_type();
    }
    if (at(Tok::kIdent) && param) return record_type();  // a record or an Array: parameters and fields only
    if (accept(Tok::kScalar)) {
      expect(Tok::kLBracket);
      const Token& d = expect(Tok::kDType);
      ty.dtype = d.text;
      ty.dtype_span = d.span;
      ty.span = {begin, expect(Tok::kRBracket).span.end};
      return ty;
    }
    if (!at(Tok::kTensor)) error_expected("a type (`Tensor[..]` or `Scalar[..]`)");
    advance();
    expect(Tok::kLBracket);
    const Token& d = expect(Tok::kDType);
    ty.dtype = d.text;
    ty.dtype_span = d.span;
    expect(Tok::kComma);
    expect(Tok::kLBracket);
    if (!at(Tok::kRBracket)) {
      do ty.shape.push_back(dim());
      while (accept(Tok::kComma) && !at(Tok::kRBracket));
    }
    expect(Tok::kRBracket);
    if (accept(Tok::kComma) && !at(Tok::kRBracket)) {
      expect(Tok::kLBracket);
      if (!at(Tok::kRBracket)) {
        do ty.preds.push_back(pred());
        while (accept(Tok::kComma) && !at(Tok::kRBracket));
      }
      expect(Tok::kRBracket);
    }
    ty.span = {begin, expect(Tok::kRBracket).span.end};
    return ty;
  }

  // NAME ('[' dim (',' dim)* ']')?  |  'Array' '[' type ',' dim ']'
  ast::Type record_type() {
    ast::Type ty;
    const Token& n = advance();
    ty.record = n.text;
    uint32_t end = n.span.end;
    while (at(Tok::kDot) && peek().kind == Tok::kIdent) {  // a module's record: `nn.Linear`
      advance();
      ty.record += "." + advance().text;
      end = t_[pos_ - 1].span.end;
    }
    ty.record_span = {n.span.begin, end};
    if (n.text == "Array") {
      expect(Tok::kLBracket);
      ty.element = std::make_unique<ast::Type>(type(/*param=*/true));
      if (ty.element->frame) {
        sink_.error(DiagKind::Syntax, ty.element->span, "an Array holds Tensors, Scalars or records, not Dataframes");
        throw SyntaxError{};
      }
      expect(Tok::kComma);
      ty.record_args.push_back(dim());
      end = expect(Tok::kRBracket).span.end;
    } else if (accept(Tok::kLBracket)) {
      if (!at(Tok::kRBracket)) {
        do ty.record_args.push_back(dim());
        while (accept(Tok::kComma) && !at(Tok::kRBracket));
      }
      end = expect(Tok::kRBracket).span.end;
    }
    ty.span = {n.span.begin, end};
    ty.dtype_span = ty.span;
    return ty;
  }

  // Dataframe[rows, Schema{ name: ctype (where rule (&& rule)*)?, ... }]
  ast::Type frame_type() {
    ast::Type ty;
    ty.frame = std::make_unique<ast::FrameType>();
    uint32_t begin = advance().span.begin;
    expect(Tok::kLBracket);
    ty.frame->rows = dim();
    expect(Tok::kComma);
    if (!at(Tok::kIdent) || cur().text != "Schema") error_expected("`Schema{..}` after the row dimension");
    advance();
    expect(Tok::kLBrace);
    while (!at(Tok::kRBrace)) {
      ty.frame->columns.push_back(column());
      if (!accept(Tok::kComma)) break;
    }
    expect(Tok::kRBrace);
    ty.span = {begin, expect(Tok::kRBracket).span.end};
    ty.dtype_span = ty.span;
    return ty;
  }

  // name: I32 | Nullable[ctype] | FixedSizeList[dtype, dim] | Category[dtype, dim], then `where` rules.
  ast::ColumnDecl column() {
    ast::ColumnDecl c;
    const Token& n = expect(Tok::kIdent);
    c.name = n.text;
    c.name_span = n.span;
    expect(Tok::kColon);
    bool nullable = at(Tok::kIdent) && cur().text == "Nullable";
    if (nullable) {
      advance();
      expect(Tok::kLBracket);
      c.nullable = true;
    }
    const bool list = at(Tok::kIdent) && cur().text == "FixedSizeList";
    if (list || (at(Tok::kIdent) && cur().text == "Category")) {
      uint32_t b = advance().span.begin;
      expect(Tok::kLBracket);
      c.dtype = expect(Tok::kDType).text;
      expect(Tok::kComma);
      (list ? c.list_size : c.categories) = dim();
      c.dtype_span = {b, expect(Tok::kRBracket).span.end};
    } else {
      if (!at(Tok::kDType))
        error_expected("a column type (a dtype, `FixedSizeList[..]`, `Category[..]` or `Nullable[..]`)");
      c.dtype_span = cur().span;
      c.dtype = advance().text;
    }
    uint32_t end = c.dtype_span.end;
    if (nullable) end = expect(Tok::kRBracket).span.end;
    if (at(Tok::kIdent) && cur().text == "where") {
      advance();
      do c.rules.push_back(column_rule());
      while (accept(Tok::kAndAnd));
      end = c.rules.back().span.end;
    }
    c.span = {n.span.begin, end};
    return c;
  }

  // name OP bound, bound := -?int | -?number | name
  ast::ColumnRule column_rule() {
    ast::ColumnRule r;
    const Token& n = expect(Tok::kIdent);
    r.subject = n.text;
    r.subject_span = n.span;
    switch (cur().kind) {
      case Tok::kAssign: case Tok::kEq: r.op = ast::Pred::Op::kEq; break;
      case Tok::kNe: r.op = ast::Pred::Op::kNe; break;
      case Tok::kLt: r.op = ast::Pred::Op::kLt; break;
      case Tok::kLe: r.op = ast::Pred::Op::kLe; break;
      case Tok::kGt: r.op = ast::Pred::Op::kGt; break;
      case Tok::kGe: r.op = ast::Pred::Op::kGe; break;
      default: error_expected("a comparison (`=`, `!=`, `<`, `<=`, `>`, `>=`) in a column refinement");
    }
    advance();
    uint32_t b = cur().span.begin;
    bool neg = accept(Tok::kMinus);
    if (at(Tok::kInt) || at(Tok::kFloat)) {
      r.bound = at(Tok::kInt) ? ast::ColumnRule::Bound::kInt : ast::ColumnRule::Bound::kFloat;
      r.bound_text = (neg ? "-" : "") + cur().text;
    } else if (!neg && at(Tok::kIdent)) {
      r.bound = ast::ColumnRule::Bound::kName;
      r.bound_text = cur().text;
    } else {
      error_expected("a literal or a dimension name after the comparison");
    }
    r.bound_span = {b, advance().span.end};
    r.span = Span::merge(n.span, r.bound_span);
    return r;
  }

  ast::Pred pred() {
    ast::Pred p;
    uint32_t begin = cur().span.begin;
    p.lhs = dim();
    if (accept(Tok::kMod)) {
      p.op = ast::Pred::Op::kModZero;
      p.rhs = dim();
      if (!accept(Tok::kAssign) && !accept(Tok::kEq)) error_expected("`=` after `mod`");
      if (!at(Tok::kInt) || cur().text != "0") error_expected("`0` (a refinement reads `A mod B = 0`)");
      p.span = {begin, advance().span.end};
      return p;
    }
    switch (cur().kind) {
      case Tok::kAssign: case Tok::kEq: p.op = ast::Pred::Op::kEq; break;
      case Tok::kNe: p.op = ast::Pred::Op::kNe; break;
      case Tok::kLt: p.op = ast::Pred::Op::kLt; break;
      case Tok::kLe: p.op = ast::Pred::Op::kLe; break;
      case Tok::kGt: p.op = ast::Pred::Op::kGt; break;
      case Tok::kGe: p.op = ast::Pred::Op::kGe; break;
      default: error_expected("`mod` or a comparison in a refinement");
    }
    advance();
    p.rhs = dim();
    p.span = {begin, p.rhs->span.end};
    return p;
  }

  // dim := term (('+'|'-') term)* ; term := atom (('*'|'/') atom)*
  std::unique_ptr<ast::DimExpr> dim() {
    Nest n(*this);
    auto lhs = dim_term();
    while (at(Tok::kPlus) || at(Tok::kMinus)) {
      auto k = advance().kind == Tok::kPlus ? ast::DimExpr::Kind::kAdd : ast::DimExpr::Kind::kSub;
      lhs = dim_bin(k, std::move(lhs), dim_term());
    }
    return lhs;
  }
  std::unique_ptr<ast::DimExpr> dim_term() {
    auto lhs = dim_atom();
    while (at(Tok::kStar) || at(Tok::kSlash)) {
      auto k = advance().kind == Tok::kStar ? ast::DimExpr::Kind::kMul : ast::DimExpr::Kind::kDiv;
      lhs = dim_bin(k, std::move(lhs), dim_atom());
    }
    return lhs;
  }
  std::unique_ptr<ast::DimExpr> dim_bin(ast::DimExpr::Kind k, std::unique_ptr<ast::DimExpr> a,
                                        std::unique_ptr<ast::DimExpr> b) {
    auto d = std::make_unique<ast::DimExpr>();
    d->kind = k;
    d->span = Span::merge(a->span, b->span);
    d->depth = std::max(a->depth, b->depth) + 1;
    if (d->depth > kMaxTreeHeight) too_deep(b->span);
    d->lhs = std::move(a);
    d->rhs = std::move(b);
    return d;
  }
  std::unique_ptr<ast::DimExpr> dim_atom() {
    auto d = std::make_unique<ast::DimExpr>();
    if (at(Tok::kInt)) {
      d->kind = ast::DimExpr::Kind::kInt;
      d->span = cur().span;
      d->value = int_value(cur());
      advance();
      return d;
    }
    if (at(Tok::kIdent)) {
      d->kind = ast::DimExpr::Kind::kName;
      d->span = cur().span;
      d->name = advance().text;
      return d;
    }
    if (at(Tok::kLParen)) {
      uint32_t b = advance().span.begin;
      auto inner = dim();
      inner->span = {b, expect(Tok::kRParen).span.end};
      return inner;
    }
    error_expected("a dimension (an integer, a dimension name or `(`)");
  }

  [[noreturn]] void too_deep(Span s) {
    sink_.error(DiagKind::Syntax, s, "expression nests too deeply (limit " + std::to_string(kMaxRecursion) +
                                         " levels of brackets, " + std::to_string(kMaxTreeHeight) + " operators)");
    throw SyntaxError{};
  }
  struct Nest {  // counts one level of parser recursion
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (p.depth_ >= kMaxRecursion) p.too_deep(p.cur().span);
      ++p.depth_;
    }
    ~Nest() { --p.depth_; }
  };
  ast::ExprPtr with_child(ast::ExprPtr parent, ast::ExprPtr child) {
    parent->depth = std::max(parent->depth, child->depth + 1);
    if (parent->depth > kMaxTreeHeight) too_deep(child->span);
    parent->args.push_back(std::move(child));
    return parent;
  }

  // Expressions, lowest precedence first.
  ast::ExprPtr expr() {
    Nest n(*this);
    return or_expr();
  }
  ast::ExprPtr binary(std::string op, ast::ExprPtr a, ast::ExprPtr b) {
    auto e = std::make_unique<ast::Expr>();
    e->kind = ast::Expr::Kind::kBinary;
    e->name = std::move(op);
    e->span = Span::merge(a->span, b->span);
    e = with_child(std::move(e), std::move(a));
    return with_child(std::move(e), std::move(b));
  }
  ast::ExprPtr or_expr() {
    auto e = and_expr();
    while (at(Tok::kOrOr)) {
      advance();
      e = binary("||", std::move(e), and_expr());
    }
    return e;
  }
  ast::ExprPtr and_expr() {
    auto e = cmp_expr();
    while (at(Tok::kAndAnd)) {
      advance();
      e = binary("&&", std::move(e), cmp_expr());
    }
    return e;
  }
  static bool is_cmp(Tok k) {
    return k == Tok::kEq || k == Tok::kNe || k == Tok::kLt || k == Tok::kLe || k == Tok::kGt || k == Tok::kGe;
  }
  ast::ExprPtr cmp_expr() {
    auto e = add_expr();
    if (is_cmp(cur().kind)) {
      std::string op = advance().text;
      e = binary(op, std::move(e), add_expr());
      if (is_cmp(cur().kind)) error_expected("no second comparison (comparisons do not chain; use `&&`)");
    }
    return e;
  }
  ast::ExprPtr add_expr() {
    auto e = mul_expr();
    while (at(Tok::kPlus) || at(Tok::kMinus)) {
      std::string op = advance().text;
      e = binary(op, std::move(e), mul_expr());
    }
    return e;
  }
  ast::ExprPtr mul_expr() {
    auto e = unary_expr();
    while (at(Tok::kStar) || at(Tok::kSlash)) {
      std::string op = advance().text;
      e = binary(op, std::move(e), unary_expr());
    }
    return e;
  }
  ast::ExprPtr unary_expr() {
    if (at(Tok::kMinus) || at(Tok::kBang)) {
      const Token& op = advance();
      auto e = std::make_unique<ast::Expr>();
      e->kind = ast::Expr::Kind::kUnary;
      e->name = op.text;
      Nest n(*this);
      auto operand = unary_expr();
      e->span = Span::merge(op.span, operand->span);
      return with_child(std::move(e), std::move(operand));
    }
    return primary();
  }
  ast::ExprPtr primary() {
    auto e = std::make_unique<ast::Expr>();
    e->span = cur().span;
    switch (cur().kind) {
      case Tok::kInt: e->kind = ast::Expr::Kind::kInt; e->text = advance().text; return e;
      case Tok::kFloat: e->kind = ast::Expr::Kind::kFloat; e->text = advance().text; return e;
      case Tok::kTrue: case Tok::kFalse:
        e->kind = ast::Expr::Kind::kBool;
        e->bool_value = advance().kind == Tok::kTrue;
        return e;
      case Tok::kDType: e->kind = ast::Expr::Kind::kDType; e->name = advance().text; return e;
      case Tok::kLParen: {
        uint32_t b = advance().span.begin;
        auto inner = expr();
        if (at(Tok::kComma)) {  // `(a, b, ..)`: a tuple
          e->kind = ast::Expr::Kind::kTuple;
          e = with_child(std::move(e), std::move(inner));
          while (accept(Tok::kComma) && !at(Tok::kRParen)) e = with_child(std::move(e), expr());
          if (e->args.size() < 2) error_expected("a second value of the tuple (one value is written without parentheses)");
          e->span = {b, expect(Tok::kRParen).span.end};
          return e;
        }
        inner->span = {b, expect(Tok::kRParen).span.end};
        return inner;
      }
      case Tok::kLBracket: {
        advance();
        e->kind = ast::Expr::Kind::kList;
        if (!at(Tok::kRBracket)) {
          do e = with_child(std::move(e), expr());
          while (accept(Tok::kComma) && !at(Tok::kRBracket));
        }
        e->span.end = expect(Tok::kRBracket).span.end;
        return e;
      }
      case Tok::kIdent: break;
      default: error_expected("an expression");
    }
    const Token& name = advance();
    e->name = name.text;
    // `df.column`, `p.layers[2].wq`: one name, the path written with `.`
    // (`p.layers.2.wq`), resolved by lang/records.cpp and lang/dataframe.cpp.
    bool path = false;
    while (at(Tok::kDot) || (at(Tok::kLBracket) && peek().kind == Tok::kInt && peek(2).kind == Tok::kRBracket)) {
      if (accept(Tok::kDot)) {
        e->name += "." + expect(Tok::kIdent).text;
      } else {
        advance();
        e->name += "." + advance().text;
        advance();
      }
      path = true;
    }
    if (path) e->span.end = t_[pos_ - 1].span.end;  // a module's fn is called by its path: `nn.gelu(x)`
    if (at(Tok::kLBracket) && peek().kind == Tok::kIdent && peek(2).kind == Tok::kAssign) {
      advance();
      do {
        const Token& d = expect(Tok::kIdent);
        expect(Tok::kAssign);
        auto v = dim();
        e->dim_arg_spans.push_back(Span::merge(d.span, v->span));
        e->dim_args.emplace_back(d.text, std::move(v));
      } while (accept(Tok::kComma) && !at(Tok::kRBracket));
      expect(Tok::kRBracket);
      if (!at(Tok::kLParen)) error_expected("`(` after explicit dimensions");
    }
    // A `(` that starts a line opens a new expression (the tuple that ends a
    // fn with several results), never the arguments of a call.
    if (!at(Tok::kLParen) || (cur().line_start && e->dim_args.empty())) {
      e->kind = ast::Expr::Kind::kName;
      return e;
    }
    e->kind = ast::Expr::Kind::kCall;
    e->callee_span = path ? Span{name.span.begin, e->span.end} : name.span;
    advance();
    while (!at(Tok::kRParen)) {
      if (at(Tok::kIdent) && peek().kind == Tok::kAssign) {
        const Token& kw = advance();
        advance();
        e->arg_keywords.push_back(kw.text);
        e->arg_keyword_spans.push_back(kw.span);
      } else {
        e->arg_keywords.emplace_back();
        e->arg_keyword_spans.push_back(cur().span);
      }
      e = with_child(std::move(e), expr());
      if (!accept(Tok::kComma)) break;
    }
    e->span.end = expect(Tok::kRParen).span.end;
    return e;
  }

  const std::vector<Token>& t_;
  DiagnosticSink& sink_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

ast::Program parse(const SourceFile&, const std::vector<Token>& tokens, DiagnosticSink& sink) {
  return Parser(tokens, sink).program();
}

}  // namespace mlk
