// The Api's work, off the transport's event loops (issue 49, finding 9): a
// bounded queue served by a fixed pool of threads, fair between clients. The
// event loops only read requests and write answers; everything that may
// block (the namespace lock, the store, the blob store) runs here, so one
// client's slow or stalled requests hold at most its share of the threads
// and never the loops that every other client's connections are served on.
//
// Fairness: each job names its client (the transport uses the request's
// token or session, or its address when it has neither) and the client's
// group (its address), and the limits hold for both: a client, and a group
// of any number of clients, has at most `max_running_per_client` jobs
// running and `max_per_client` admitted (queued or running) at once, so
// neither many credentials from one address nor one credential from many
// addresses takes more. Free threads take the clients' queues in turn, one
// job each. Admission is refused, never blocked: the caller answers 503 at
// once.
//
// Contract: every admitted job has exactly one of its two callbacks called,
// once: `run` on a pool thread, or `drop` when it will not run: it waited
// longer than `max_wait_ms` (dropped by expire(), or when a thread takes
// it), or stop() came first. `drop` runs on the thread that found it so.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mlk::service {

class WorkQueue {
 public:
  struct Limits {
    int threads = 8;                 // jobs running at once, all clients
    int max_queued = 1024;           // jobs waiting, all clients
    int max_per_client = 64;         // one client's jobs waiting or running
    int max_running_per_client = 4;  // one client's jobs running
    int64_t max_wait_ms = 30000;     // a job that waited longer is dropped, not run
  };
  enum class Admit { kQueued, kFull, kClientFull, kStopping };

  explicit WorkQueue(Limits limits);
  ~WorkQueue();  // stop()
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  Admit submit(const std::string& client, const std::string& group, std::function<void()> run,
               std::function<void()> drop);
  // Drops every job that has waited longer than max_wait_ms (their `drop`
  // runs here). The transport's watchdog calls it, so that jobs time out
  // even while every thread is busy.
  void expire();
  // Admits nothing more, drops what waits, lets running jobs finish and
  // joins the threads. Idempotent.
  void stop();

  const Limits& limits() const { return limits_; }
  int queued() const;
  int running() const;

 private:
  struct Job {
    std::function<void()> run, drop;
    int64_t since_ms;
    std::string group;
  };
  struct Client {
    std::deque<Job> waiting;
    int running = 0;
  };
  struct Group {
    int admitted = 0, running = 0;
  };
  // Forgets a client or group that has nothing waiting or running.
  void tidy(const std::string& client, const std::string& group);
  void serve();
  // A job to run next, from the first client in turn that may run one; false when none.
  bool take(Job& job, std::string& client);

  Limits limits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int queued_ = 0, running_ = 0;
  std::map<std::string, Client> clients_;  // those with jobs waiting or running
  std::map<std::string, Group> groups_;    // likewise
  std::deque<std::string> turn_;           // clients with jobs waiting, in the order they are served
  std::vector<std::thread> threads_;
};

}  // namespace mlk::service
