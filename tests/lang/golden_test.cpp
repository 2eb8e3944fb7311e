// Golden tests of the front end: every tests/golden/*.tl file carries its
// expected diagnostics inline, and every examples/*.tl file must check clean.
//
// An expectation is a comment `//~ Kind COL: message` on the offending line,
// or `//~^ Kind COL: message` for the line above (one more `^` per line up).
// Run with MLK_UPDATE_GOLDEN=1 to rewrite the expectations from the actual
// diagnostics (then review the diff).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "lang/frontend.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;

struct Expect {
  uint32_t line, col;
  std::string kind, message;
  bool operator<(const Expect& o) const {
    return std::tie(line, col, kind, message) < std::tie(o.line, o.col, o.kind, o.message);
  }
  bool operator==(const Expect& o) const { return !(*this < o) && !(o < *this); }
  std::string str() const {
    return std::to_string(line) + ":" + std::to_string(col) + " " + kind + ": " + message;
  }
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string l;
  while (std::getline(ss, l)) out.push_back(l);
  return out;
}

const std::regex kExpectRe(R"(//~(\^*) (\w+) (\d+): (.*)$)");

std::vector<Expect> expectations(const std::string& text) {
  std::vector<Expect> out;
  auto lines = lines_of(text);
  for (uint32_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(lines[i], m, kExpectRe)) continue;
    uint32_t line = i + 1 - static_cast<uint32_t>(m[1].length());
    out.push_back({line, static_cast<uint32_t>(std::stoul(m[3])), m[2], m[4]});
  }
  return out;
}

std::vector<Expect> actual(const FrontendResult& r) {
  std::vector<Expect> out;
  for (const auto& d : r.diagnostics) {
    LineCol lc = r.file->line_col(d.span.begin);
    out.push_back({lc.line, lc.col, diag_kind_name(d.kind), d.message});
  }
  return out;
}

// Rewrites the file's expectations from `got`: drops every `//~` comment and
// inserts one `//~^...` line per diagnostic after its line.
void update(const fs::path& p, const std::string& text, std::vector<Expect> got) {
  std::sort(got.begin(), got.end());
  std::vector<std::string> kept;
  std::vector<uint32_t> orig_line;  // original line number of each kept line
  auto lines = lines_of(text);
  for (uint32_t i = 0; i < lines.size(); ++i) {
    std::string l = lines[i];
    size_t pos = l.find("//~");
    if (pos != std::string::npos) {
      bool whole = l.find_first_not_of(' ') == pos;
      if (whole) continue;
      l = l.substr(0, pos);
      while (!l.empty() && l.back() == ' ') l.pop_back();
    }
    kept.push_back(l);
    orig_line.push_back(i + 1);
  }
  std::string out;
  for (size_t k = 0; k < kept.size(); ++k) {
    out += kept[k] + "\n";
    int carets = 0;
    for (const auto& e : got)
      if (e.line == orig_line[k]) {
        ++carets;
        out += "//~" + std::string(carets, '^') + " " + e.kind + " " + std::to_string(e.col) + ": " + e.message + "\n";
      }
  }
  std::ofstream(p) << out;
}

std::vector<fs::path> files_in(const std::string& dir) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(std::string(MLK_SOURCE_DIR) + "/" + dir))
    if (e.path().extension() == ".tl") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(Golden, EveryFileMatchesItsExpectations) {
  auto files = files_in("tests/golden");
  ASSERT_GE(files.size(), 5u);
  bool do_update = std::getenv("MLK_UPDATE_GOLDEN") != nullptr;
  for (const auto& p : files) {
    std::string text = read(p);
    auto r = compile_source(p.string(), text);  // the path: imports resolve against its directory
    auto got = actual(r);
    if (do_update) {
      // Lines of diagnostics refer to the file as it is, before stripping.
      update(p, text, got);
      continue;
    }
    auto want = expectations(text);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    std::vector<std::string> g, w;
    for (const auto& e : got) g.push_back(e.str());
    for (const auto& e : want) w.push_back(e.str());
    EXPECT_EQ(w, g) << "in " << p;
  }
}

TEST(Golden, EveryDiagnosticKindHasAGoldenTest) {
  std::set<std::string> covered;
  for (const auto& p : files_in("tests/golden"))
    for (const auto& e : expectations(read(p))) covered.insert(e.kind);
  for (DiagKind k : all_diag_kinds())
    EXPECT_TRUE(covered.count(diag_kind_name(k))) << "diagnostic kind " << diag_kind_name(k)
                                                   << " has no golden test in tests/golden/";
}

TEST(Golden, ExamplesCheckClean) {
  auto files = files_in("examples");
  ASSERT_GE(files.size(), 4u);
  for (const auto& p : files) {
    auto r = compile_source(p.filename().string(), read(p));
    EXPECT_TRUE(r.ok()) << r.rendered();
    EXPECT_FALSE(r.module.functions.empty()) << p;
  }
}

}  // namespace
}  // namespace mlk
