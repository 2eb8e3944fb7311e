// The tuning log (autotune/tuning_log.h).
#include "autotune/tuning_log.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "base/json.h"
#include "base/log.h"

namespace mlk::tune {

using nlohmann::json;

namespace {

Measurement::Verdict parse_verdict(const std::string& s) {
  if (s == "ok") return Measurement::Verdict::kOk;
  if (s == "wrong") return Measurement::Verdict::kWrong;
  if (s == "crash") return Measurement::Verdict::kCrash;
  if (s == "timeout") return Measurement::Verdict::kTimeout;
  return Measurement::Verdict::kError;
}

// Trials of an earlier run of the same tuning problem, by schedule hash;
// `finals` gets its final-round re-measurements.
Expected<std::map<std::string, Trial>> read_log(const std::string& path, const json& header, FinalTimes* finals,
                                                const TuningLog::KnobCheck& check) {
  std::map<std::string, Trial> out;
  std::ifstream in(path);
  if (!in) return out;
  std::string line;
  bool first = true;
  int lineno = 0;
  uintmax_t good = 0;  // bytes of complete lines
  while (std::getline(in, line)) {
    ++lineno;
    bool complete = !in.eof();
    json j = line.empty() ? json() : parse_json(line);
    if (line.empty() || j.is_discarded() || !complete) {
      // A run killed mid-write leaves a torn last line: cut it off so the
      // appended trials start on a line of their own. Anything else is damage.
      if (in.peek() == EOF && (j.is_discarded() || !complete)) {
        in.close();
        std::filesystem::resize_file(path, good);
        break;
      }
      if (line.empty()) {
        good += 1;
        continue;
      }
      return Status::Corruption(path + ":" + std::to_string(lineno) + ": not a JSON line");
    }
    good += line.size() + 1;
    if (j.contains("final")) {
      (*finals)[j.value("schedule_hash", "")] = j.value("times_ms", std::vector<double>{});
      continue;
    }
    if (first) {
      first = false;
      if (!j.contains("header") || j["header"] != header)
        return Status::InvalidArgument(path + " is the log of a different tuning run (function, shape, profile, seed or "
                                       "toolchain differ); remove it or choose another --log");
      continue;
    }
    Trial t;
    t.index = j.value("trial", 0);
    t.origin = j.value("origin", "");
    auto s = Schedule::from_json(j["schedule"].dump());
    if (!s.ok()) return Status::Corruption(path + ":" + std::to_string(lineno) + ": " + s.status().message());
    t.schedule = *s;
    t.knobs = j.value("knobs", Knobs{});
    if (check)
      if (Status s = check(t.knobs); !s.ok())
        return Status::Corruption(path + ":" + std::to_string(lineno) + ": " + s.message() +
                                  "; remove the log or choose another --log");
    t.predicted_ms = j.value("predicted_ms", 0.0);
    t.m.verdict = parse_verdict(j.value("verdict", "error"));
    t.m.detail = j.value("detail", "");
    t.m.compile_ms = j.value("compile_ms", 0.0);
    t.m.max_abs_error = j.value("max_abs_error", 0.0);
    t.m.max_rel_error = j.value("max_rel_error", 0.0);
    t.m.median_ms = j.value("median_ms", 0.0);
    t.m.times_ms = j.value("times_ms", std::vector<double>{});
    t.at_s = j.value("at_s", 0.0);
    out[t.schedule.hash()] = t;
  }
  return out;
}

}  // namespace

json trial_json(const Trial& t) {
  return {{"trial", t.index},
          {"origin", t.origin},
          {"schedule_hash", t.schedule.hash()},
          {"schedule", json::parse(t.schedule.to_json())},
          {"knobs", t.knobs},
          {"predicted_ms", t.predicted_ms},
          {"verdict", verdict_name(t.m.verdict)},
          {"detail", t.m.detail},
          {"compile_ms", t.m.compile_ms},
          {"max_abs_error", t.m.max_abs_error},
          {"max_rel_error", t.m.max_rel_error},
          {"median_ms", t.m.median_ms},
          {"times_ms", t.m.times_ms},
          {"at_s", t.at_s}};
}

Expected<std::unique_ptr<TuningLog>> TuningLog::Open(const std::string& path, const json& header,
                                                     const KnobCheck& check) {
  auto log = std::unique_ptr<TuningLog>(new TuningLog());
  // A line of the wrong shape makes nlohmann::json throw: the log is damaged.
  auto prev = [&]() -> Expected<std::map<std::string, Trial>> {
    try {
      return read_log(path, header, &log->finals_, check);
    } catch (const json::exception& e) {
      return Status::Corruption(path + " is not a tuning log of mlk (" + e.what() + "); remove it or choose another --log");
    }
  }();
  if (!prev.ok()) return prev.status();
  log->earlier_ = std::move(prev).value();
  const bool fresh = log->earlier_.empty();
  log->out_.open(path, fresh ? std::ios::trunc : std::ios::app);
  if (!log->out_) return Status::IOError("cannot write the tuning log " + path);
  if (fresh) log->out_ << json{{"header", header}}.dump() << "\n";
  log->out_.flush();
  return log;
}

void TuningLog::Append(const Trial& t) {
  out_ << trial_json(t).dump() << "\n";
  out_.flush();
}

void TuningLog::AppendFinal(const std::string& schedule_hash, const std::vector<double>& times_ms) {
  out_ << json{{"final", true}, {"schedule_hash", schedule_hash}, {"times_ms", times_ms}}.dump() << "\n";
  out_.flush();
}

namespace {

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v < 10 ? "%.3f" : "%.1f", v);
  return b;
}

}  // namespace

void log_trial_progress(const Trial& t, const TrialProgress& p) {
  // A candidate built but not run (a GPU profile where there is no GPU) is
  // ranked by the cost model: its time, and a best among such, is an
  // estimate, and says so. A failed one says why, in one line.
  const bool estimated = t.m.ok() && t.m.times_ms.empty();
  const std::string approx = estimated ? "~" : "", est = estimated ? " (estimate)" : "";
  std::string best = p.has_best ? approx + fmt(p.best_ms) + " ms" : "none yet";
  std::string speed = p.has_best && p.default_ms > 0 ? " (" + fmt(p.default_ms / p.best_ms) + "x over naive)" : "";
  std::string compile = t.m.compile_ms > 0 ? "  compile " + fmt(t.m.compile_ms / 1000) + " s" : "";
  std::string result = t.m.ok() ? approx + fmt(p.score_ms) + " ms" + est : "";
  if (!t.m.ok() && !t.m.detail.empty()) {
    std::string why = t.m.detail.substr(0, t.m.detail.find('\n'));
    if (why.size() > 100) why = why.substr(0, 97) + "...";
    result = "(" + why + ")";
  }
  log_linef(LogLevel::kProgress, "[tune %s] trial %zu/%d %-9s %-7s %s%s  best %s%s  ETA %.0fs", p.label.c_str(),
            p.trials, p.max_trials, t.origin.c_str(), verdict_name(t.m.verdict), result.c_str(), compile.c_str(),
            best.c_str(), speed.c_str(), std::max(0.0, p.eta_s));
}

}  // namespace mlk::tune
