#include "base/json.h"

namespace mlk {

namespace {

using nlohmann::json;

// A SAX pass that only counts nesting and stops at the first level too deep
// or the first syntax error.
class DepthCheck : public nlohmann::json_sax<json> {
 public:
  DepthCheck(int max_depth, int64_t max_values) : max_(max_depth), max_values_(max_values) {}
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return value() && open(); }
  bool key(string_t&) override { return value(); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return value() && open(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& e) override {
    why = e.what();
    (void)pos;
    return false;
  }
  std::string why;
  bool too_deep = false, too_many = false;

 private:
  bool value() {
    if (max_values_ <= 0 || ++values_ <= max_values_) return true;
    too_many = true;
    return false;
  }
  bool open() {
    if (++depth_ <= max_) return true;
    too_deep = true;
    return false;
  }
  bool close() {
    --depth_;
    return true;
  }
  int max_;
  int depth_ = 0;
  int64_t max_values_, values_ = 0;
};

}  // namespace

json parse_json(std::string_view text, std::string* why, int max_depth, int64_t max_values) {
  DepthCheck check(max_depth, max_values);
  bool ok = json::sax_parse(text.begin(), text.end(), &check);
  if (!ok) {
    if (why)
      *why = check.too_deep   ? "nested deeper than " + std::to_string(max_depth) + " levels of arrays and objects"
             : check.too_many ? "more than " + std::to_string(max_values) + " values (arrays, objects, keys, scalars)"
                              : (check.why.empty() ? "not valid JSON" : check.why);
    return json(json::value_t::discarded);
  }
  return json::parse(text.begin(), text.end(), nullptr, false);
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace mlk
