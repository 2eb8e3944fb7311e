#include "targets/profile.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "targets/profiles_embedded.h"

namespace mlk {

Expected<Profile> parse_profile(const std::string& text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(where + ": not valid JSON: " + e.what());
  }
  Profile p;
  p.json = text;
  try {
    p.name = j.at("name").get<std::string>();
    p.kind = j.at("kind").get<std::string>();
    p.description = j.value("description", "");
    p.halide_target = j.at("halide_target").get<std::string>();
    p.features = j.value("features", std::vector<std::string>{});
    if (p.kind == "cpu") {
      p.vector_bits = j.at("vector_bits").get<int>();
      p.cores = j.at("cores").get<int>();
      p.l1_kib = j.at("l1_kib").get<int>();
      p.l2_kib = j.at("l2_kib").get<int>();
      p.l3_kib = j.at("l3_kib").get<int>();
    } else if (p.kind == "cuda") {
      p.compute_capability = j.at("compute_capability").get<int>();
      p.ptx_arch = j.at("ptx_arch").get<std::string>();
      p.host_features = j.at("host_features").get<std::vector<std::string>>();
      p.sm_count = j.at("sm_count").get<int>();
      p.shared_mem_per_block = j.at("shared_mem_per_block").get<int>();
      p.shared_mem_per_sm = j.at("shared_mem_per_sm").get<int>();
      p.registers_per_sm = j.at("registers_per_sm").get<int>();
      p.max_threads_per_block = j.at("max_threads_per_block").get<int>();
      p.warp_size = j.at("warp_size").get<int>();
    } else {
      return Status::InvalidArgument(where + ": kind must be \"cpu\" or \"cuda\", found \"" + p.kind + "\"");
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(where + ": " + e.what());
  }
  return p;
}

const std::vector<Profile>& all_profiles() {
  static const std::vector<Profile> profiles = [] {
    std::vector<Profile> v;
    for (const auto& [name, text] : embedded_profiles()) {
      auto p = parse_profile(text, "targets/profiles/" + name);
      MLK_CHECK(p.ok(), "an embedded profile does not parse");
      v.push_back(*p);
    }
    std::sort(v.begin(), v.end(), [](const Profile& a, const Profile& b) { return a.name < b.name; });
    return v;
  }();
  return profiles;
}

Expected<Profile> find_profile(const std::string& name) {
  std::string known;
  for (const auto& p : all_profiles()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  return Status::NotFound("unknown target profile `" + name + "` (known: " + known + "; see `mlk targets`)");
}

}  // namespace mlk
