// The shipped schedules' database (runtime/shipped.h): its parse and its
// match. The runtime's use of it is tests/python/shipped_schedules.py.
#include "runtime/shipped.h"

#include <gtest/gtest.h>

namespace mlk {
const char* shipped_schedules_text();  // schedules/shipped.json, embedded
namespace {

CpuInfo cpu() {
  CpuInfo c;
  c.vendor = "GenuineIntel";
  c.family = 6;
  c.model = 143;
  c.features = {"avx512f", "avx2"};
  c.cores = 2;
  return c;
}

rt::ShippedEntry entry(int64_t b, int64_t d, const std::string& schedule) {
  rt::ShippedEntry e;
  e.fn_hash = "h";
  e.precision = "f32";
  e.dims = {{"B", b}, {"D", d}};
  e.family_key = cpu_family_key(cpu());
  e.cores = 2;
  e.schedule = schedule;
  return e;
}

TEST(Shipped, FamilyKeyIsVendorFamilyAndSortedFeatures) {
  EXPECT_EQ(cpu_family_key(cpu()), "GenuineIntel 6/143: avx2,avx512f");
}

TEST(Shipped, ExactShapeFirstElseNearestWithinReach) {
  const std::vector<rt::ShippedEntry> db = {entry(8, 384, "b8"), entry(1, 384, "b1"), entry(32, 384, "b32")};
  auto exact = rt::find_shipped(db, "h", "f32", {{"B", 1}, {"D", 384}}, cpu());
  ASSERT_TRUE(exact);
  EXPECT_TRUE(exact->exact);
  EXPECT_EQ(exact->entry.schedule, "b1");
  auto near = rt::find_shipped(db, "h", "f32", {{"B", 16}, {"D", 384}}, cpu());  // 1 from b8 and from b32: the first
  ASSERT_TRUE(near);
  EXPECT_FALSE(near->exact);
  EXPECT_EQ(near->entry.schedule, "b8");
  // Reach: a sum of |log2| up to kShippedReach (3) and no further.
  EXPECT_TRUE(rt::find_shipped(db, "h", "f32", {{"B", 256}, {"D", 384}}, cpu()));   // 3 from b32
  EXPECT_FALSE(rt::find_shipped(db, "h", "f32", {{"B", 257}, {"D", 384}}, cpu()));  // just past it
  EXPECT_TRUE(rt::find_shipped(db, "h", "f32", {{"B", 8}, {"D", 3072}}, cpu()));    // 3 from b8, in D
  EXPECT_FALSE(rt::find_shipped(db, "h", "f32", {{"B", 8}, {"D", 3100}}, cpu()));   // just past it
}

TEST(Shipped, EveryConditionOfTheMatchHolds) {
  const std::vector<rt::ShippedEntry> db = {entry(8, 384, "s")};
  const DimEnv dims = {{"B", 8}, {"D", 384}};
  EXPECT_TRUE(rt::find_shipped(db, "h", "f32", dims, cpu()));
  EXPECT_FALSE(rt::find_shipped(db, "other", "f32", dims, cpu()));
  EXPECT_FALSE(rt::find_shipped(db, "h", "bf16", dims, cpu()));
  EXPECT_FALSE(rt::find_shipped(db, "h", "f32", {{"B", 8}, {"E", 384}}, cpu()));  // another signature
  CpuInfo c = cpu();
  c.cores = 4;
  EXPECT_FALSE(rt::find_shipped(db, "h", "f32", dims, c));
  c = cpu();
  c.family = 25;
  EXPECT_FALSE(rt::find_shipped(db, "h", "f32", dims, c));
  c = cpu();
  c.model = 207;
  EXPECT_FALSE(rt::find_shipped(db, "h", "f32", dims, c));
  c = cpu();
  c.features.push_back("amx_bf16");
  EXPECT_FALSE(rt::find_shipped(db, "h", "f32", dims, c));
}

TEST(Shipped, ParseNamesTheEntryAtFault) {
  const std::string good =
      R"({"fn": "f", "fn_hash": "h", "precision": "f32", "program": "p.tl", "dims": {"N": 8},
          "machine": {"family_key": "k", "cores": 2, "cpu_model": "CPU X"}, "schedule": {"version": 1, "stages": {}},
          "provenance": {"date": "2026-12-07", "mlk_version": "0.1.0", "command": "mlk tune p.tl"}})";
  auto ok = rt::parse_shipped(R"({"format": "mlk-shipped-schedules-1", "entries": [)" + good + "]}", "db.json");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].dims.at("N"), 8);
  EXPECT_EQ((*ok)[0].provenance, "tuned on CPU X (2 cores) 2026-12-07 by mlk 0.1.0: mlk tune p.tl");
  std::string bad_dim = good;
  bad_dim.replace(bad_dim.find("\"N\": 8"), 6, "\"N\": 0");
  auto bad = rt::parse_shipped(R"({"format": "mlk-shipped-schedules-1", "entries": [)" + good + "," + bad_dim + "]}",
                               "db.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "db.json: entry 1: dim `N` is not a positive integer");
  auto fmt = rt::parse_shipped(R"({"format": "other", "entries": []})", "db.json");
  ASSERT_FALSE(fmt.ok());
  EXPECT_EQ(fmt.status().message(), "db.json: `format` is not \"mlk-shipped-schedules-1\"");
  auto notobj = rt::parse_shipped("[]", "db.json");
  ASSERT_FALSE(notobj.ok());
  EXPECT_EQ(notobj.status().message(), "db.json: not a JSON object");
}

TEST(Shipped, TheEmbeddedDatabaseParses) {
  auto db = rt::parse_shipped(shipped_schedules_text(), "schedules/shipped.json");
  EXPECT_TRUE(db.ok()) << db.status().message();
}

TEST(Shipped, AFieldOfTheWrongTypeIsAnErrorNamingTheEntry) {
  auto bad = rt::parse_shipped(
      R"({"format": "mlk-shipped-schedules-1", "entries": [{"fn": "f", "fn_hash": "h", "precision": "f32",
          "program": "p.tl", "dims": {"N": 8}, "machine": {"family_key": "k", "cores": 2, "cpu_model": 7},
          "schedule": {}, "provenance": {}}]})",
      "db.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "db.json: entry 0: `machine.cpu_model` is not a string");
  auto syntax = rt::parse_shipped("{\"format\": ", "db.json");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("db.json: not JSON: "), std::string::npos) << syntax.status().message();
}

}  // namespace
}  // namespace mlk
