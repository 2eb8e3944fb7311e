// The parse loop of the flag tables (cli/flags.h) and the help text made from
// them (cli/usage.h), on a small table: every message by its full text.
#include <gtest/gtest.h>

#include <sstream>

#include "cli/flags.h"
#include "cli/usage.h"

namespace mlk::cli {
namespace {

struct Opts {
  std::string file, name, target;
  bool verbose = false;
  int count = 0;
  std::vector<std::string> quotas;
};

CommandSpec spec(Opts& o) {
  return {
      .name = "demo",
      .summary = "a command for tests",
      .positionals = "FILE",
      .description = "Does nothing, carefully.\n",
      .flags =
          {
              {.name = "--name", .metavar = "NAME", .help = "a name", .set = store(o.name)},
              {.name = "--target", .metavar = "PROFILE", .help = "where it goes", .set = store(o.target),
               .required = true, .required_note = " (see `demo targets`)"},
              {.name = "--count", .metavar = "N", .help = "how many", .default_value = "0", .set = store_count(o.count)},
              {.name = "--quota", .metavar = "TEAM=SIZE", .help = "a limit",
               .set =
                   [&o](const std::string&, const std::string& v) {
                     o.quotas.push_back(v);
                     return Status::Ok();
                   },
               .repeatable = true},
              {.name = "-v", .help = "say more", .set = set_bool(o.verbose), .aliases = {"--verbose"}},
          },
      .epilogue = "That is all.\n",
      .positional = one_positional(o.file, " (one FILE)"),
      .no_positional = "no input file",
  };
}

// The usage error of `args`, or "" when they parse.
std::string error_of(std::vector<std::string> args) {
  Opts o;
  auto r = parse_command_line(spec(o), args);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Status::Code::kUsage) << r.status().message();
  return r.status().message();
}

TEST(Flags, BothValueFormsSwitchesAliasesAndPositionals) {
  Opts o;
  auto r = parse_command_line(spec(o), {"f.tl", "--name=a=b", "--target", "host", "--count", "3", "--verbose"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(o.file, "f.tl");
  EXPECT_EQ(o.name, "a=b");  // split at the first `=` only
  EXPECT_EQ(o.target, "host");
  EXPECT_EQ(o.count, 3);
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(r->given, (std::vector<std::string>{"--name", "--target", "--count", "-v"}));  // by table name
}

TEST(Flags, RepeatedFlagsReachTheSetterEachTime) {
  Opts o;
  auto r = parse_command_line(spec(o), {"f", "--target=x", "--quota", "a=1K", "--quota=b=2G", "--name", "one",
                                        "--name", "two"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(o.quotas, (std::vector<std::string>{"a=1K", "b=2G"}));
  EXPECT_EQ(o.name, "two");  // a flag that is not repeatable: the last one wins
}

TEST(Flags, ValuesMayStartWithADashButNotBeAFlag) {
  EXPECT_EQ(error_of({"f", "--target", "x", "--count", "-5"}), "--count: `-5` is not a positive integer");
  EXPECT_EQ(error_of({"f", "--target", "x", "--name", "-"}), "");
  EXPECT_EQ(error_of({"f", "--name", "--target", "x"}), "--name needs a value");
  EXPECT_EQ(error_of({"f", "--name", "--verbose"}), "--name needs a value");
  EXPECT_EQ(error_of({"f", "--target"}), "--target needs a value");
  EXPECT_EQ(error_of({"f", "--target="}), "--target needs a non-empty value");
}

TEST(Flags, UnknownOptionsAndSuggestions) {
  EXPECT_EQ(error_of({"f", "--frobnicate"}), "unknown option `--frobnicate`");
  EXPECT_EQ(error_of({"f", "--nmae", "x"}), "unknown option `--nmae` (did you mean `--name`?)");
  EXPECT_EQ(error_of({"f", "--targte=x"}), "unknown option `--targte` (did you mean `--target`?)");
  EXPECT_EQ(error_of({"f", "--verbsoe"}), "unknown option `--verbsoe` (did you mean `--verbose`?)");
  EXPECT_EQ(error_of({"f", "-x"}), "unknown option `-x`");  // too short to guess
}

TEST(Flags, SwitchesTakeNoValue) {
  EXPECT_EQ(error_of({"f", "--target", "x", "--verbose=1"}), "--verbose takes no value (given `--verbose=1`)");
}

TEST(Flags, PositionalsAndRequiredFlags) {
  EXPECT_EQ(error_of({"--target", "x"}), "no input file");
  EXPECT_EQ(error_of({"a", "b", "--target", "x"}), "unexpected argument `b` (one FILE)");
  EXPECT_EQ(error_of({"a"}), "--target PROFILE is required (see `demo targets`)");
  Opts o;
  auto r = parse_command_line(spec(o), {"--target", "x", "--", "--name"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(o.file, "--name");  // after `--`, arguments are positional
  CommandSpec none{.name = "bare"};
  EXPECT_EQ(parse_command_line(none, {"x"}).status().message(), "takes no arguments");
  EXPECT_TRUE(parse_command_line(none, {}).ok());
}

CommandSpec with_subcommands(Opts& o) {
  return {
      .name = "store",
      .forms = {{"COMMAND [ARGS]", {"--name"}}},
      .subcommands = {{"gc", {"!--count"}, "collect"}, {"push KEY", {"--target"}, "send"}, {"pull KEY", {"--target"}, "fetch"}},
      .flags = {{.name = "--name", .metavar = "PATH", .help = "the store", .set = store(o.name)},
                {.name = "--count", .metavar = "SIZE", .help = "a limit", .set = store_count(o.count),
                 .required_note = " (e.g. 10)"},
                {.name = "--target", .metavar = "URL", .help = "a server", .set = store(o.target)}},
      .positional = [](const std::string&) { return Status::Ok(); },
  };
}

TEST(Flags, SubcommandsOwnTheirFlags) {
  Opts o;
  const CommandSpec s = with_subcommands(o);
  auto seen = parse_command_line(s, {"push", "k", "--count", "3", "--name", "n"});
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(check_subcommand_flags(s, "push", *seen).message(), "--count belongs to `gc`");
  seen = parse_command_line(s, {"gc", "--target", "u", "--count", "1"});
  EXPECT_EQ(check_subcommand_flags(s, "gc", *seen).message(), "--target belongs to `push` and `pull`");
  seen = parse_command_line(s, {"gc", "--name", "n"});
  EXPECT_EQ(check_subcommand_flags(s, "gc", *seen).message(), "gc needs --count SIZE (e.g. 10)");
  seen = parse_command_line(s, {"pull", "k", "--name", "n", "--target", "u"});
  EXPECT_TRUE(check_subcommand_flags(s, "pull", *seen).ok());
}

TEST(Flags, SecondsAreDecimalDigitsWithAtMostOnePoint) {
  EXPECT_EQ(*parse_seconds("--poll", "0.2"), 0.2);
  EXPECT_EQ(*parse_seconds("--lease", "30"), 30.0);
  EXPECT_EQ(*parse_seconds("--lease", ".5"), 0.5);
  for (const char* bad : {"", ".", "-1", "+1", "1e3", "inf", "nan", "0x10", "1.2.3", "1 ", "1s"}) {
    auto v = parse_seconds("--poll", bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().message(), std::string("--poll: `") + bad +
                                         "` is not a number of seconds (digits and at most one point, e.g. 0.5)");
  }
}

TEST(Usage, TextFromTheTable) {
  Opts o;
  // The help column is two past the longest flag (at most 22 wide); a
  // synopsis line breaks before a flag that would pass kHelpWidth (88).
  EXPECT_EQ(usage_text(spec(o)),
            "usage: mlk demo FILE [--name NAME] --target PROFILE [--count N] [--quota TEAM=SIZE]...\n"
            "                [-v]\n"
            "\n"
            "Does nothing, carefully.\n"
            "\n"
            "  --name NAME        a name\n"
            "  --target PROFILE   where it goes\n"
            "  --count N          how many (default: 0)\n"
            "  --quota TEAM=SIZE  a limit\n"
            "  -v, --verbose      say more\n"
            "\n"
            "That is all.\n");
  CommandSpec s = with_subcommands(o);
  EXPECT_EQ(usage_text(s),
            "usage: mlk store COMMAND [ARGS] [--name PATH]\n"
            "\n"
            "commands:\n"
            "  gc --count SIZE  collect\n"
            "  push KEY [--target URL]\n"
            "                   send\n"
            "  pull KEY [--target URL]\n"
            "                   fetch\n"
            "\n"
            "  --name PATH   the store\n"
            "  --count SIZE  a limit\n"
            "  --target URL  a server\n");
  // Without forms, one synopsis line per subcommand: its flags, then the common ones.
  s.forms.clear();
  EXPECT_EQ(synopsis(s),
            "usage: mlk store gc --count SIZE [--name PATH]\n"
            "       mlk store push KEY [--target URL] [--name PATH]\n"
            "       mlk store pull KEY [--target URL] [--name PATH]\n");
}

TEST(Usage, LongTextIsWrappedAtTheHelpWidth) {
  Opts o;
  CommandSpec s = spec(o);
  // 21 columns of flag, then words that fill the line to exactly 88.
  s.flags[0].help = std::string(30, 'a') + " " + std::string(36, 'b') + " " + std::string(30, 'c');
  s.flags.push_back({.name = "--a-very-long-flag-name", .metavar = "WITH_A_VALUE", .help = "help below", .set = store(o.name)});
  const std::string text = usage_text(s);
  EXPECT_NE(text.find("\n  --name NAME        " + std::string(30, 'a') + " " + std::string(36, 'b') + "\n" +
                      std::string(21, ' ') + std::string(30, 'c') + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  --a-very-long-flag-name WITH_A_VALUE\n" + std::string(21, ' ') + "help below\n"), std::string::npos)
      << text;
  EXPECT_EQ(synopsis(s),
            "usage: mlk demo FILE [--name NAME] --target PROFILE [--count N] [--quota TEAM=SIZE]...\n"
            "                [-v] [--a-very-long-flag-name WITH_A_VALUE]\n");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), kHelpWidth) << line;
}

TEST(Usage, MarkdownHoldsEachHelpTextBetweenMarkers) {
  Opts o;
  const std::string md = markdown({spec(o)});
  EXPECT_EQ(md.find("<!-- BEGIN GENERATED: mlk --help "), 0u) << md;
  const std::string demo = "<!-- BEGIN GENERATED: mlk demo --help (from the flag tables in cli/; scripts/sync_cli_docs.py) -->\n```\n" +
                           usage_text(spec(o)) + "```\n<!-- END GENERATED -->\n";
  EXPECT_NE(md.find(demo), std::string::npos) << md;
  EXPECT_NE(md.find("  demo       a command for tests\n"), std::string::npos) << md;
}

}  // namespace
}  // namespace mlk::cli
