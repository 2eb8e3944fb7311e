// The mesh of ranks of an SPMD run (lang/shard_plan.h) over MPI: the one
// place mlk calls MPI (library mlk_mpi). Every collective is non-blocking and
// polled against a deadline, so a rank that died or hangs makes the others
// fail with a message naming the collective, not wait forever.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "lang/shard_plan.h"
#include "lang/tensor.h"

namespace mlk::spmd {

class Mesh {
 public:
  ~Mesh();  // MPI_Finalize
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  // MPI_Init, then one communicator per set of mesh axes in `groups` (made
  // now, while every rank is known to be alive). The world must have exactly
  // as many ranks as the mesh (InvalidArgument otherwise).
  static Expected<std::unique_ptr<Mesh>> Join(int* argc, char*** argv, const std::vector<ir::MeshAxis>& mesh,
                                              const std::vector<std::vector<int>>& groups, double timeout_s);

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  const std::vector<int64_t>& coords() const { return coords_; }

  // `c` applied to `t` by the ranks that differ only in `c.axes`: all-reduce
  // in place, or all-gather of the blocks along `c.dim`. `what` names it in
  // messages. A deadline miss is an IOError.
  Status apply(const ir::Collective& c, HostTensor& t, const std::string& what);

  // Ends every rank of the run (MPI_Abort) with exit status `code`.
  [[noreturn]] void abort(int code);

 private:
  Mesh() = default;
  Status wait(void* request, const std::string& what);
  struct Group;
  std::vector<std::unique_ptr<Group>> groups_;
  std::vector<ir::MeshAxis> mesh_;
  std::vector<int64_t> coords_;
  int64_t rank_ = 0, size_ = 1;
  double timeout_s_ = 60;
};

}  // namespace mlk::spmd
