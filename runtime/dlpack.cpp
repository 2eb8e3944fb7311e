#include "runtime/dlpack.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "runtime/boundary.h"

namespace mlk::rt {

static_assert(sizeof(DLTensor) == 48, "DLTensor layout");
static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32 && sizeof(DLManagedTensorVersioned) == 80,
              "DLManagedTensorVersioned must have the layout of dlpack.h 1.x");

namespace {

std::atomic<int64_t> g_live_buffers{0};
std::atomic<int64_t> g_live_exports{0};

}  // namespace

// --- consuming ------------------------------------------------------------------

Expected<ConsumedTensor> ConsumedTensor::Adopt(DLManagedTensor* m, const std::string& what) {
  if (!m) return Status::InvalidArgument(what + ": the DLPack capsule holds a NULL DLManagedTensor");
  ConsumedTensor c;
  c.legacy_ = m;
  c.tensor_ = &m->dl_tensor;
  return c;
}

Expected<ConsumedTensor> ConsumedTensor::Adopt(DLManagedTensorVersioned* m, const std::string& what) {
  if (!m) return Status::InvalidArgument(what + ": the DLPack capsule holds a NULL DLManagedTensorVersioned");
  ConsumedTensor c;
  c.versioned_ = m;  // owned from here: an error below deletes it (c's destructor)
  if (m->version.major != kDLPackMajor)
    return Status::InvalidArgument(what + ": DLPack version " + std::to_string(m->version.major) + "." +
                                   std::to_string(m->version.minor) + ", but mlk reads DLPack 1.x (major version " +
                                   std::to_string(kDLPackMajor) + ")");
  const DLTensor& t = m->dl_tensor;
  if (m->version.minor >= 2 && t.ndim > 0 && !t.strides) {
    const std::string version = std::to_string(m->version.major) + "." + std::to_string(m->version.minor);
    return Status::InvalidArgument(what + ": strides are NULL, which DLPack " + version +
                                   " does not allow (from 1.2 on, strides are required when ndim > 0)");
  }
  c.tensor_ = &t;
  c.read_only_ = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  return c;
}

ConsumedTensor::ConsumedTensor(ConsumedTensor&& o) noexcept { *this = std::move(o); }

ConsumedTensor& ConsumedTensor::operator=(ConsumedTensor&& o) noexcept {
  if (this != &o) {
    Release();
    legacy_ = o.legacy_;
    versioned_ = o.versioned_;
    tensor_ = o.tensor_;
    read_only_ = o.read_only_;
    o.legacy_ = nullptr;
    o.versioned_ = nullptr;
    o.tensor_ = nullptr;
  }
  return *this;
}

ConsumedTensor::~ConsumedTensor() { Release(); }

void ConsumedTensor::Release() {
  if (legacy_ && legacy_->deleter) legacy_->deleter(legacy_);
  if (versioned_ && versioned_->deleter) versioned_->deleter(versioned_);
  legacy_ = nullptr;
  versioned_ = nullptr;
  tensor_ = nullptr;
}

Status ConsumedTensor::CheckWritable(const std::string& what) const {
  if (read_only_)
    return Status::InvalidArgument(what + ": read-only (its producer set the DLPack READ_ONLY flag); mlk writes the "
                                          "result there, so pass a writable tensor");
  return Status::Ok();
}

// --- host buffers and exports ----------------------------------------------------

Expected<std::shared_ptr<HostBuffer>> HostBuffer::Allocate(DType dtype, std::vector<int64_t> shape) {
  int64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0 || shape[i] > kMaxExtent)
      return Status::InvalidArgument("axis " + std::to_string(i) + " extent " + std::to_string(shape[i]) +
                                     " is outside [0, 2147483647]");
    numel *= shape[i];
    if (numel > (int64_t{1} << 62) / 8) return Status::InvalidArgument("a tensor of that shape is too large");
  }
  const size_t nbytes = static_cast<size_t>(numel) * static_cast<size_t>(dtype_bits(dtype) / 8);
  // aligned_alloc wants a size that is a multiple of the alignment (and > 0).
  void* p = std::aligned_alloc(64, std::max<size_t>(64, (nbytes + 63) / 64 * 64));
  if (!p) return Status::IOError("cannot allocate " + std::to_string(nbytes) + " bytes for a result (out of memory)");
  std::shared_ptr<HostBuffer> b(new HostBuffer());
  b->data_ = p;
  b->dtype_ = dtype;
  b->shape_ = std::move(shape);
  b->nbytes_ = nbytes;
  ++g_live_buffers;
  return b;
}

HostBuffer::~HostBuffer() {
  std::free(data_);
  --g_live_buffers;
}

DLTensor HostBuffer::view() const {
  DLTensor t{};
  t.data = data_;
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape_.size());
  t.dtype = to_dl(dtype_);
  t.shape = const_cast<int64_t*>(shape_.data());
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

namespace {

// What an export's manager_ctx points to: the buffer and the shape and
// strides its DLTensor points into.
struct ExportCtx {
  std::shared_ptr<HostBuffer> buf;
  std::vector<int64_t> shape, strides;
};

void fill(DLTensor* t, ExportCtx* ctx) {
  const auto& s = ctx->buf->shape();
  ctx->shape = s;
  ctx->strides.assign(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) ctx->strides[i] = ctx->strides[i + 1] * s[i + 1];
  *t = ctx->buf->view();
  t->shape = ctx->shape.data();
  t->strides = ctx->strides.data();  // non-NULL, as DLPack 1.2 requires
}

}  // namespace

DLManagedTensor* export_legacy(std::shared_ptr<HostBuffer> buf) {
  auto* ctx = new ExportCtx{std::move(buf), {}, {}};
  auto* m = new DLManagedTensor{};
  fill(&m->dl_tensor, ctx);
  m->manager_ctx = ctx;
  m->deleter = [](DLManagedTensor* self) {
    delete static_cast<ExportCtx*>(self->manager_ctx);
    delete self;
    --g_live_exports;
  };
  ++g_live_exports;
  return m;
}

DLManagedTensorVersioned* export_versioned(std::shared_ptr<HostBuffer> buf, bool read_only) {
  auto* ctx = new ExportCtx{std::move(buf), {}, {}};
  auto* m = new DLManagedTensorVersioned{};
  m->version = {kDLPackMajor, kDLPackExportMinor};
  fill(&m->dl_tensor, ctx);
  m->manager_ctx = ctx;
  m->flags = read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  m->deleter = [](DLManagedTensorVersioned* self) {
    delete static_cast<ExportCtx*>(self->manager_ctx);
    delete self;
    --g_live_exports;
  };
  ++g_live_exports;
  return m;
}

int64_t live_host_buffers() { return g_live_buffers.load(); }
int64_t live_exports() { return g_live_exports.load(); }

}  // namespace mlk::rt
