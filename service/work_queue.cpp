#include "service/work_queue.h"

#include <algorithm>
#include <chrono>

namespace mlk::service {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

WorkQueue::WorkQueue(Limits limits) : limits_(limits) {
  limits_.threads = std::max(1, limits_.threads);
  limits_.max_running_per_client = std::max(1, limits_.max_running_per_client);
  limits_.max_per_client = std::max(limits_.max_running_per_client, limits_.max_per_client);
  for (int i = 0; i < limits_.threads; ++i) threads_.emplace_back([this] { serve(); });
}

WorkQueue::~WorkQueue() { stop(); }

WorkQueue::Admit WorkQueue::submit(const std::string& client, const std::string& group, std::function<void()> run,
                                   std::function<void()> drop) {
  std::lock_guard<std::mutex> g(mu_);
  if (stopping_) return Admit::kStopping;
  if (queued_ >= limits_.max_queued) return Admit::kFull;
  Client& c = clients_[client];
  Group& gr = groups_[group];
  if (static_cast<int>(c.waiting.size()) + c.running >= limits_.max_per_client || gr.admitted >= limits_.max_per_client) {
    tidy(client, group);
    return Admit::kClientFull;
  }
  if (c.waiting.empty()) turn_.push_back(client);
  c.waiting.push_back(Job{std::move(run), std::move(drop), now_ms(), group});
  gr.admitted++;
  queued_++;
  cv_.notify_one();
  return Admit::kQueued;
}

void WorkQueue::tidy(const std::string& client, const std::string& group) {
  auto c = clients_.find(client);
  if (c != clients_.end() && c->second.running == 0 && c->second.waiting.empty()) clients_.erase(c);
  auto g = groups_.find(group);
  if (g != groups_.end() && g->second.admitted == 0) groups_.erase(g);
}

bool WorkQueue::take(Job& job, std::string& client) {
  for (size_t i = 0; i < turn_.size(); ++i) {
    Client& c = clients_[turn_[i]];
    if (c.running >= limits_.max_running_per_client) continue;
    Group& g = groups_[c.waiting.front().group];
    if (g.running >= limits_.max_running_per_client) continue;
    client = turn_[i];
    job = std::move(c.waiting.front());
    c.waiting.pop_front();
    c.running++;
    g.running++;
    queued_--;
    running_++;
    turn_.erase(turn_.begin() + static_cast<std::ptrdiff_t>(i));
    if (!c.waiting.empty()) turn_.push_back(client);  // its next job waits for every other client's turn
    return true;
  }
  return false;
}

void WorkQueue::serve() {
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    Job job;
    std::string client;
    cv_.wait(lk, [&] { return stopping_ || take(job, client); });
    if (!job.run) return;  // stopping, and nothing taken
    lk.unlock();
    bool late = now_ms() - job.since_ms > limits_.max_wait_ms;
    (late ? job.drop : job.run)();
    std::string group = std::move(job.group);
    job = Job{};  // what the callbacks hold goes before the next job
    lk.lock();
    running_--;
    clients_[client].running--;
    Group& g = groups_[group];
    g.running--;
    g.admitted--;
    tidy(client, group);
    cv_.notify_all();  // the client and its group may run another job now
  }
}

void WorkQueue::expire() {
  std::vector<Job> late;
  {
    std::lock_guard<std::mutex> g(mu_);
    const int64_t now = now_ms();
    for (size_t i = 0; i < turn_.size();) {
      const std::string client = turn_[i];
      Client& c = clients_[client];
      while (!c.waiting.empty() && now - c.waiting.front().since_ms > limits_.max_wait_ms) {
        Job& j = c.waiting.front();
        groups_[j.group].admitted--;
        std::string group = j.group;
        late.push_back(std::move(j));
        c.waiting.pop_front();
        queued_--;
        tidy("", group);
      }
      if (c.waiting.empty()) {
        turn_.erase(turn_.begin() + static_cast<std::ptrdiff_t>(i));
        tidy(client, "");
      } else {
        ++i;
      }
    }
  }
  for (auto& j : late) j.drop();
}

void WorkQueue::stop() {
  std::vector<Job> dropped;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    for (auto& [name, c] : clients_)
      for (auto& j : c.waiting) {
        groups_[j.group].admitted--;
        dropped.push_back(std::move(j));
      }
    for (auto it = clients_.begin(); it != clients_.end();) {
      it->second.waiting.clear();
      it = it->second.running ? std::next(it) : clients_.erase(it);
    }
    turn_.clear();
    queued_ = 0;
  }
  cv_.notify_all();
  for (auto& j : dropped) j.drop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

int WorkQueue::queued() const {
  std::lock_guard<std::mutex> g(mu_);
  return queued_;
}

int WorkQueue::running() const {
  std::lock_guard<std::mutex> g(mu_);
  return running_;
}

}  // namespace mlk::service
