// CUDA at the boundary, tested without a GPU: synthetic kDLCUDA tensors
// through the device rule (runtime/boundary.h), a cuda_sm90 artifact built
// here (its device-memory entry, the PTX's target, the sm_90 cubin from
// ptxas), and what a call does on a machine without a CUDA driver (a clear
// error, never a crash). Where a driver and a device are present, the same
// tests run the kernel on device memory and check it against the reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lang/compare.h"
#include "lang/interpreter.h"
#include "runtime/boundary.h"
#include "runtime/mlk_runtime.h"
#include "runtime/runtime.h"
#include "artifact/build.h"
#include "targets/cuda_driver.h"
#include "targets/detect.h"
#include "artifact/loaded.h"
#include "targets/profile.h"
#include "targets/toolchain.h"
#include "tests/runtime/dl_tensor.h"
#include "tests/test_support.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kNorms = std::string(MLK_SOURCE_DIR) + "/examples/norms.tl";

// A device pointer as a DLPack producer would hand it over: never
// dereferenced on the host; 256-byte aligned, as cuMemAlloc returns them.
void* fake_device_ptr(int k) { return reinterpret_cast<void*>(uintptr_t{0x7f0000000000} + uintptr_t(k) * 0x100000); }

void to_cuda(Dl& t, int device, int k) {
  t.d.device = {kDLCUDA, device};
  t.d.data = fake_device_ptr(k);
}

const ir::Function& rmsnorm() {
  static const ir::Module m = testing_support::load_example("norms.tl");
  return *m.find("rmsnorm");
}

rt::Placement cuda_on(int device) {
  rt::Placement p;
  p.cuda = true;
  p.device = device;
  p.profile = "cuda_sm90";
  return p;
}

TEST(CudaBoundary, CpuKernelRefusesACudaTensorNamingTheArgument) {
  Dl x(DType::F32, {2, 4, 64}), w(DType::F32, {64}), eps(DType::F32, {}), out(DType::F32, {2, 4, 64});
  to_cuda(w, 0, 1);
  rt::Placement cpu;
  cpu.profile = "host";
  auto c = rt::check_call(rmsnorm(), {&x.d, &w.d, &eps.d}, &out.d, {}, cpu);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "argument 1 `w` of `rmsnorm`: on cuda:0, but the kernel runs on the CPU (host); pass a CPU tensor "
            "(x.cpu()) or select a CUDA profile (e.g. cuda_sm90)");
  w.d.device = {kDLCPU, 0};
  w.d.data = w.t.bytes.data();
  out.d.device = {kDLCUDA, 0};
  c = rt::check_call(rmsnorm(), {&x.d, &w.d, &eps.d}, &out.d, {}, cpu);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("the output of `rmsnorm`: on cuda:0, but the kernel runs on the CPU"));
  out.d.device = {static_cast<DLDeviceType>(10), 0};  // ROCm
  c = rt::check_call(rmsnorm(), {&x.d, &w.d, &eps.d}, &out.d, {}, cpu);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("the output of `rmsnorm`: on device type 10; CPU kernels take CPU tensors"));
}

TEST(CudaBoundary, CudaKernelTakesDeviceTensorsInPlaceAndHostTensorsToo) {
  Dl x(DType::F32, {2, 4, 64}), w(DType::F32, {64}), eps(DType::F32, {}), out(DType::F32, {2, 4, 64});
  to_cuda(x, 0, 1);
  to_cuda(eps, 0, 2);
  to_cuda(out, 0, 3);
  auto c = rt::check_call(rmsnorm(), {&x.d, &w.d, &eps.d}, &out.d, {}, cuda_on(0));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->on_device, (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(c->out_on_device);
  EXPECT_EQ(c->args[0], fake_device_ptr(1));  // the caller's pointer itself: no copy
  EXPECT_EQ(c->args[1], w.t.bytes.data());
  EXPECT_EQ(c->out, fake_device_ptr(3));
  EXPECT_EQ(c->dims.at("D"), 64);
  // Pinned host memory is host memory: copied, like kDLCPU.
  w.d.device = {kDLCUDAHost, 0};
  c = rt::check_call(rmsnorm(), {&x.d, &w.d, &eps.d}, &out.d, {}, cuda_on(0));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->on_device[1]);
}

TEST(CudaBoundary, AWrongDeviceIdIsRefusedNamingTheArgumentAndTheContextDevice) {
  Dl x(DType::F32, {2, 4, 64}), w(DType::F32, {64}), eps(DType::F32, {}), out(DType::F32, {2, 4, 64});
  to_cuda(x, 0, 1);
  to_cuda(out, 1, 2);
  auto c = rt::check_call(rmsnorm(), {&x.d, &w.d, &eps.d}, &out.d, {}, cuda_on(0));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "the output of `rmsnorm`: on cuda:1, but the kernel (cuda_sm90) runs in this process's CUDA context on "
            "cuda:0 (MLK_CUDA_DEVICE chooses it; one context per process)");
  to_cuda(out, 0, 2);
  x.d.device = {static_cast<DLDeviceType>(13), 0};  // kDLCUDAManaged
  c = rt::check_call(rmsnorm(), {&x.d, &w.d, &eps.d}, &out.d, {}, cuda_on(0));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "argument 0 `x` of `rmsnorm`: on device type 13; CUDA kernels take tensors on cuda:0 or in host memory");
}

TEST(CudaBoundary, DeviceTensorsMeetEveryOtherRuleToo) {
  Dl x(DType::F32, {2, 4, 64}), w(DType::F32, {63}), eps(DType::F32, {}), out(DType::F32, {2, 4, 64});
  to_cuda(x, 0, 1);
  to_cuda(w, 0, 2);
  to_cuda(out, 0, 3);
  auto c = rt::check_call(rmsnorm(), {&x.d, &w.d, &eps.d}, &out.d, {}, cuda_on(0));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("w.shape[0] = 63 but D = 64, bound by x.shape[2]"));
  Dl w2(DType::F32, {64});
  to_cuda(w2, 0, 2);
  x.d.byte_offset = 2;
  c = rt::check_call(rmsnorm(), {&x.d, &w2.d, &eps.d}, &out.d, {}, cuda_on(0));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "argument 0 `x` of `rmsnorm`: data is not aligned to its 4-byte elements");
  x.d.byte_offset = 0;
  c = rt::check_call(rmsnorm(), {&x.d, &w2.d, &eps.d}, &x.d, {}, cuda_on(0));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("the output of `rmsnorm`: shares memory with argument 0 `x`"));
}

// One cuda_sm90 artifact of rmsnorm, built here (no GPU needed).
class CudaArtifactTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing_support::scratch_dir("mlk_cuda_boundary_test", "rmsnorm_cuda_sm90");
    static const ir::Module m = testing_support::load_example("norms.tl");
    auto prof = find_profile("cuda_sm90");
    ASSERT_TRUE(prof.ok());
    BuildRequest req{&m, "rmsnorm", kNorms, *prof, {{"B", 2}, {"S", 4}, {"D", 64}}, {}, dir_};
    auto res = build_artifact(req);
    ASSERT_TRUE(res.ok()) << res.status().message();
    manifest_ = nlohmann::json::parse(res->manifest_json);
  }
  static bool gpu_here() {
    const CudaInfo info = detect_cuda();
    for (const auto& d : info.devices)
      if (d.compute_capability >= 90) return true;
    return false;
  }
  static std::string dir_;
  static nlohmann::json manifest_;
};
std::string CudaArtifactTest::dir_;
nlohmann::json CudaArtifactTest::manifest_;

TEST_F(CudaArtifactTest, ExportsADeviceMemoryEntryThatWrapsTheCallersBuffers) {
  EXPECT_EQ(manifest_["cuda"]["entry_symbol"], "mlk_rmsnorm_cuda");
  std::ifstream in(dir_ + "/rmsnorm_abi.c");
  std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(src, HasSubstr("int mlk_rmsnorm_cuda(const mlk_tensor_t* args"));
  EXPECT_THAT(src, HasSubstr("halide_cuda_wrap_device_ptr(NULL, &b[i]"));
  EXPECT_THAT(src, HasSubstr("halide_cuda_detach_device_ptr(NULL, &b[i])"));
  EXPECT_THAT(src, HasSubstr("halide_set_cuda_get_stream(mlkabi_get_stream)"));
  EXPECT_THAT(src, HasSubstr("cuDevicePrimaryCtxRetain"));
  auto a = LoadedArtifact::Load(dir_);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE((*a)->is_cuda());
  EXPECT_TRUE((*a)->has_cuda_entry());
  // A CPU artifact has neither.
  static const ir::Module m = testing_support::load_example("norms.tl");
  const std::string cpu_dir = testing_support::scratch_dir("mlk_cuda_boundary_test", "rmsnorm_host");
  auto host = resolve_profile("host");
  ASSERT_TRUE(host.ok());
  auto res = build_artifact({&m, "rmsnorm", kNorms, *host, {{"B", 2}, {"S", 4}, {"D", 64}}, {}, cpu_dir});
  ASSERT_TRUE(res.ok()) << res.status().message();
  EXPECT_FALSE(nlohmann::json::parse(res->manifest_json).contains("cuda"));
  auto c = LoadedArtifact::Load(cpu_dir);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE((*c)->is_cuda());
  EXPECT_FALSE((*c)->has_cuda_entry());
}

TEST_F(CudaArtifactTest, SaysWhatThePtxTargetsAndAssemblesACubinForSm90) {
  // Halide 21's highest CUDA capability is 86: the PTX says so, and the
  // driver JIT-compiles it for sm_90.
  EXPECT_EQ(manifest_["cuda"]["ptx_target"], "sm_86");
  EXPECT_THAT(manifest_["cuda"]["loaded"].get<std::string>(), HasSubstr("JIT-compiled by the driver"));
  auto tk = find_cuda_toolkit();
  if (!tk || tk->ptxas.empty()) {
    if (std::getenv("MLK_NO_CUDA_TOOLKIT")) GTEST_SKIP() << "MLK_NO_CUDA_TOOLKIT is set: no ptxas, no cubin";
    FAIL() << "ptxas not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): install the CUDA toolkit, or set "
              "MLK_NO_CUDA_TOOLKIT=1 to run without the cubin checks";
  }
  EXPECT_EQ(manifest_["ptxas"]["status"], "assembled for sm_90");
  ASSERT_TRUE(manifest_["files"].contains("rmsnorm.cubin"));
  EXPECT_THAT(manifest_["cuda"]["cubin"].get<std::string>(), HasSubstr("rmsnorm.cubin (ptxas, sm_90)"));
  // The cubin is a CUDA ELF (OS/ABI 0x41) for sm_90: the SM is in e_flags,
  // bits 0-7 up to ELF ABI version 7, bits 8-15 from version 8 (CUDA 12.8+).
  std::ifstream in(dir_ + "/rmsnorm.cubin", std::ios::binary);
  std::string elf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(elf.size(), 64u);
  EXPECT_EQ(elf.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(static_cast<unsigned char>(elf[7]), 0x41);
  uint32_t flags = 0;
  std::memcpy(&flags, elf.data() + 48, 4);  // e_flags of an ELF64 header
  const unsigned abi = static_cast<unsigned char>(elf[8]);
  EXPECT_EQ(abi >= 8 ? (flags >> 8) & 0xff : flags & 0xff, 90u) << "e_flags " << flags << ", ABI version " << abi;
}

TEST_F(CudaArtifactTest, TheRuntimeSaysWhatCopiesACallCosts) {
  auto r = rt::Runtime::Open({.cache = dir_ + "/unused.db"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto prog = (*r)->LoadArtifactDir(dir_);
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  auto k = (*r)->GetKernel(*prog, "rmsnorm", *rt::TargetPolicy::Parse("cuda_sm90"), {{"B", 2}, {"S", 4}, {"D", 64}});
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_TRUE((*k)->on_cuda());
  EXPECT_THAT((*k)->selection().reason,
              HasSubstr("; CUDA: tensors on cuda:0 are used in place (no copy); host tensors cost a copy of each input "
                        "to the device and of the result back, every call"));
}

// Device memory for the GPU half of the next test (only where a device is).
struct DeviceBuffer {
  uint64_t ptr = 0;
  size_t bytes = 0;
  ~DeviceBuffer() {
    if (ptr) (*cuda::driver())->mem_free(ptr);
  }
};

TEST_F(CudaArtifactTest, ACallWithoutADriverFailsClearlyAndOnAGpuMatchesTheReference) {
  auto r = rt::Runtime::Open({.cache = dir_ + "/unused.db"});
  ASSERT_TRUE(r.ok());
  auto prog = (*r)->LoadArtifactDir(dir_);
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  auto k = (*r)->GetKernel(*prog, "rmsnorm", *rt::TargetPolicy::Parse("cuda_sm90"), {{"B", 2}, {"S", 4}, {"D", 64}});
  ASSERT_TRUE(k.ok());
  Dl x(DType::F32, {2, 4, 64}, 1), w(DType::F32, {64}, 2), eps(DType::F32, {}), out(DType::F32, {2, 4, 64});
  eps.t.set(0, 1e-5);
  // A wrong device is refused before any driver is asked.
  Dl dx(DType::F32, {2, 4, 64});
  to_cuda(dx, 3, 1);
  Status s = (*k)->Run({&dx.d, &w.d, &eps.d}, &out.d);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("argument 0 `x` of `rmsnorm`: on cuda:3, but the kernel (cuda_sm90) runs"));

  if (!gpu_here()) {
    // Host tensors and device tensors alike: a Status naming the driver.
    for (bool device : {false, true}) {
      if (device) to_cuda(x, 0, 1);
      Status st = (*k)->Run({&x.d, &w.d, &eps.d}, &out.d);
      ASSERT_FALSE(st.ok());
      if (!detect_cuda().driver_loaded) EXPECT_EQ(st.code(), Status::Code::kUnsupported);
      if (!detect_cuda().driver_loaded)
        EXPECT_THAT(st.message(), HasSubstr("`rmsnorm` is a CUDA kernel (cuda_sm90) and cannot run here: the CUDA "
                                            "driver (libcuda.so.1) cannot be loaded"));
    }
    // The artifact's own entry, called directly (no runtime): the same, from the C wrapper.
    auto a = LoadedArtifact::Load(dir_);
    ASSERT_TRUE(a.ok());
    Dl hx(DType::F32, {2, 4, 64});
    HostTensor res;
    Status direct = (*a)->RunInto(rmsnorm(), {hx.t, w.t, eps.t}, {{"B", 2}, {"S", 4}, {"D", 64}}, res);
    ASSERT_FALSE(direct.ok());
    if (!detect_cuda().driver_loaded)
      EXPECT_THAT(direct.message(), HasSubstr("(CUDA): the CUDA driver (libcuda.so.1) cannot be loaded: this CUDA "
                                              "artifact needs an NVIDIA driver"));
    return;
  }
  // A GPU: inputs uploaded once, the kernel on device memory (in place), the
  // result read back and compared with the reference interpreter.
  const cuda::Driver* d = *cuda::driver();
  auto ctx = cuda::process_context(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status().message();
  cuda::ScopedContext scope(*ctx);
  ASSERT_TRUE(scope.ok());
  DeviceBuffer bx, bw, be, bo;
  for (auto [buf, t] : {std::pair{&bx, &x}, std::pair{&bw, &w}, std::pair{&be, &eps}, std::pair{&bo, &out}}) {
    buf->bytes = t->t.bytes.size();
    ASSERT_EQ(d->mem_alloc(&buf->ptr, buf->bytes), 0);
    ASSERT_EQ(d->memcpy_htod(buf->ptr, t->t.bytes.data(), buf->bytes), 0);
    t->d.device = {kDLCUDA, 0};
    t->d.data = reinterpret_cast<void*>(buf->ptr);
  }
  Status st = (*k)->Run({&x.d, &w.d, &eps.d}, &out.d);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(d->ctx_synchronize(), 0);
  HostTensor got(DType::F32, {2, 4, 64});
  ASSERT_EQ(d->memcpy_dtoh(got.bytes.data(), bo.ptr, bo.bytes), 0);
  static const ir::Module m = testing_support::load_example("norms.tl");
  auto want = interpret(m, "rmsnorm", {x.t, w.t, eps.t}, {{"B", 2}, {"S", 4}, {"D", 64}});
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE(compare(*want, got, tolerance_for(DType::F32, 64)).ok());
}

TEST(CudaCAbi, ACpuKernelRefusesCudaTensorsThroughTheCAbiAndTakesAStream) {
  const std::string dir = testing_support::scratch_dir("mlk_cuda_boundary_test", "c_abi");
  fs::create_directories(dir);
  mlk_runtime_t* rt = nullptr;
  ASSERT_EQ(mlk_runtime_open((dir + "/cache.db").c_str(), nullptr, nullptr, &rt), MLK_RT_OK) << mlk_runtime_last_error();
  mlk_kernel_t* k = nullptr;
  ASSERT_EQ(mlk_runtime_get_kernel(rt, kNorms.c_str(), nullptr, "rmsnorm", "host", "B=2,S=4,D=64", &k), MLK_RT_OK)
      << mlk_runtime_last_error();
  EXPECT_EQ(mlk_kernel_on_cuda(k), 0);
  Dl x(DType::F32, {2, 4, 64}), w(DType::F32, {64}), eps(DType::F32, {}), out(DType::F32, {2, 4, 64});
  const DLTensor* args[3] = {&x.d, &w.d, &eps.d};
  to_cuda(x, 0, 1);
  EXPECT_EQ(mlk_kernel_run_on_stream(k, args, 3, &out.d, nullptr), MLK_RT_ERR_INVALID);
  EXPECT_THAT(std::string(mlk_runtime_last_error()),
              HasSubstr("argument 0 `x` of `rmsnorm`: on cuda:0, but the kernel runs on the CPU (host)"));
  x.d.device = {kDLCPU, 0};
  x.d.data = x.t.bytes.data();
  // A CPU kernel ignores the stream.
  EXPECT_EQ(mlk_kernel_run_on_stream(k, args, 3, &out.d, reinterpret_cast<void*>(0x1234)), MLK_RT_OK)
      << mlk_runtime_last_error();
  mlk_runtime_close(rt);
}

}  // namespace
}  // namespace mlk
