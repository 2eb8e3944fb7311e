// The mesh over MPI (spmd/mesh.h).
#include "spmd/mesh.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "spmd/blocks.h"

namespace mlk::spmd {

struct Mesh::Group {
  std::vector<int> axes;  // sorted
  MPI_Comm comm = MPI_COMM_NULL;
};

Mesh::~Mesh() {
  for (auto& g : groups_)
    if (g->comm != MPI_COMM_NULL) MPI_Comm_free(&g->comm);
  MPI_Finalize();
}

Expected<std::unique_ptr<Mesh>> Mesh::Join(int* argc, char*** argv, const std::vector<ir::MeshAxis>& mesh,
                                           const std::vector<std::vector<int>>& groups, double timeout_s) {
  MPI_Init(argc, argv);
  std::unique_ptr<Mesh> m(new Mesh());
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  m->rank_ = r;
  m->size_ = n;
  m->mesh_ = mesh;
  m->timeout_s_ = timeout_s;
  int64_t want = 1;
  for (const auto& a : mesh) want *= a.size;
  if (want != n)
    return Status::InvalidArgument("the mesh has " + std::to_string(want) + " ranks, but " + std::to_string(n) +
                                   " were started");
  m->coords_ = mesh_coords(mesh, r);
  for (std::vector<int> axes : groups) {
    std::sort(axes.begin(), axes.end());
    bool have = false;
    for (const auto& g : m->groups_) have = have || g->axes == axes;
    if (have) continue;
    // Ranks agreeing on every other axis share a communicator, ordered by
    // their coordinates along `axes` (row-major, as the blocks are).
    int color = 0, key = 0;
    for (size_t k = 0; k < mesh.size(); ++k) {
      bool in = std::count(axes.begin(), axes.end(), static_cast<int>(k)) > 0;
      int& v = in ? key : color;
      v = v * static_cast<int>(mesh[k].size) + static_cast<int>(m->coords_[k]);
    }
    auto g = std::make_unique<Group>();
    g->axes = axes;
    MPI_Comm_split(MPI_COMM_WORLD, color, key, &g->comm);
    m->groups_.push_back(std::move(g));
  }
  return m;
}

Status Mesh::wait(void* request, const std::string& what) {
  MPI_Request* req = static_cast<MPI_Request*>(request);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  for (int spin = 0;; ++spin) {
    int done = 0;
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done) return Status::Ok();
    if (std::chrono::steady_clock::now() > deadline)
      return Status::IOError(what + " did not complete within " + std::to_string(static_cast<int>(timeout_s_)) +
                             " s (--collective-timeout); another rank died or hangs");
    if (spin > 100) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(ir::Collective::Kind k) {
  switch (k) {
    case ir::Collective::Kind::kAllReduceMax: return MPI_MAX;
    case ir::Collective::Kind::kAllReduceMin: return MPI_MIN;
    default: return MPI_SUM;
  }
}

}  // namespace

Status Mesh::apply(const ir::Collective& c, HostTensor& t, const std::string& what) {
  if (c.kind == ir::Collective::Kind::kNone) return Status::Ok();
  std::vector<int> axes = c.axes;
  std::sort(axes.begin(), axes.end());
  MPI_Comm comm = MPI_COMM_NULL;
  for (const auto& g : groups_)
    if (g->axes == axes) comm = g->comm;
  if (comm == MPI_COMM_NULL) return Status::Internal("no communicator for " + what);
  MPI_Request req;
  if (c.kind == ir::Collective::Kind::kAllGather) {
    int parts = 0;
    MPI_Comm_size(comm, &parts);
    std::vector<uint8_t> all(t.bytes.size() * parts);
    MPI_Iallgather(t.bytes.data(), static_cast<int>(t.bytes.size()), MPI_BYTE, all.data(),
                   static_cast<int>(t.bytes.size()), MPI_BYTE, comm, &req);
    if (Status s = wait(&req, what); !s.ok()) return s;
    std::vector<HostTensor> blocks(parts, HostTensor());
    for (int i = 0; i < parts; ++i) {
      blocks[i].dtype = t.dtype;
      blocks[i].shape = t.shape;
      blocks[i].bytes.assign(all.begin() + i * t.bytes.size(), all.begin() + (i + 1) * t.bytes.size());
    }
    t = concat_blocks(blocks, c.dim);
    return Status::Ok();
  }
  MPI_Datatype type = mpi_type(t.dtype);
  if (type == MPI_DATATYPE_NULL)
    return Status::Unsupported(what + " on " + std::string(dtype_name(t.dtype)) +
                               " values: an SPMD run reduces F32, F64, I32 and I64 only");
  MPI_Iallreduce(MPI_IN_PLACE, t.bytes.data(), static_cast<int>(t.numel()), type, mpi_op(c.kind), comm, &req);
  return wait(&req, what);
}

void Mesh::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace mlk::spmd
