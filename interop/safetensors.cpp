// Strict safetensors reader and atomic writer; see safetensors.h for the contract.
#include "interop/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

namespace mlk::safetensors {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // R2, as in the reference

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int bits;
  size_t alignment;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::BOOL, "BOOL", 8, 1},          {DType::F4, "F4", 4, 1},
    {DType::F6_E2M3, "F6_E2M3", 6, 1},    {DType::F6_E3M2, "F6_E3M2", 6, 1},
    {DType::U8, "U8", 8, 1},              {DType::I8, "I8", 8, 1},
    {DType::F8_E5M2, "F8_E5M2", 8, 1},    {DType::F8_E4M3, "F8_E4M3", 8, 1},
    {DType::F8_E8M0, "F8_E8M0", 8, 1},    {DType::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8, 1},
    {DType::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8, 1},
    {DType::I16, "I16", 16, 2},           {DType::U16, "U16", 16, 2},
    {DType::F16, "F16", 16, 2},           {DType::BF16, "BF16", 16, 2},
    {DType::I32, "I32", 32, 4},           {DType::U32, "U32", 32, 4},
    {DType::F32, "F32", 32, 4},           {DType::C64, "C64", 64, 4},
    {DType::F64, "F64", 64, 8},           {DType::I64, "I64", 64, 8},
    {DType::U64, "U64", 64, 8},
};

const DTypeInfo& Info(DType d) {
  const auto i = static_cast<size_t>(d);
  MLK_CHECK(i < std::size(kDTypes) && kDTypes[i].dtype == d, "kDTypes out of sync with DType");
  return kDTypes[i];
}

// JSON-quoted, escaped, and shortened for messages; invalid UTF-8 is replaced.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 80;
  std::string cut(s.substr(0, kMax));
  std::string q = nlohmann::json(cut).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return s.size() > kMax ? q.substr(0, q.size() - 1) + "...\"" : q;
}

template <typename Int>
std::string ShapeText(DType d, const std::vector<Int>& shape) {
  constexpr size_t kMaxDims = 16;  // keeps messages short for hostile shapes
  std::string s = std::string(dtype_name(d)) + " [";
  for (size_t i = 0; i < shape.size() && i < kMaxDims; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() > kMaxDims ? ", ...]" : "]");
}

std::string Prefix(const std::string& where) {
  return where.empty() ? "safetensors: " : "safetensors: " + where + ": ";
}

// Offset of the first byte that breaks strict UTF-8 (no overlongs, surrogates or
// code points above U+10FFFF), or npos when `s` is valid.
size_t Utf8ErrorOffset(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    if (c < 0x80) { ++i; continue; }
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return i;
    if (n - i < len) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    i += len;
  }
  return std::string_view::npos;
}

// One header entry as parsed, before the offset checks (R6..R9).
struct RawEntry {
  std::string name;
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;
  std::vector<uint64_t> offsets;  // exactly 2 once the entry is complete
};

// Streams the header and checks its schema as it goes, so that a hostile header
// never builds a DOM: duplicate keys, unknown, missing or mistyped fields stop the
// parse with `error` set. Nesting deeper than a valid header is refused at once.
class HeaderSax final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<RawEntry> entries;
  std::map<std::string, std::string> metadata;
  std::string error;

  bool null() override { return Value(Kind::kOther, "null"); }
  bool boolean(bool v) override { return Value(Kind::kOther, v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override {
    if (v >= 0) return number_unsigned(static_cast<uint64_t>(v));  // only "-0" lands here
    return Value(Kind::kOther, std::to_string(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    uint_ = v;
    return Value(Kind::kUnsigned, std::to_string(v));
  }
  bool number_float(number_float_t, const string_t& s) override { return Value(Kind::kOther, s); }
  bool string(string_t& s) override {
    str_ = std::move(s);
    return Value(Kind::kString, Quote(str_));
  }
  bool binary(binary_t&) override { return Fail("header holds binary data"); }
  bool start_object(std::size_t) override { return Value(Kind::kObject, "an object"); }
  bool start_array(std::size_t) override { return Value(Kind::kArray, "an array"); }
  bool key(string_t& k) override;
  bool end_object() override;
  bool end_array() override;
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    const size_t cut = what.find("] ");
    if (error.empty()) error = "header is not valid JSON: " + (cut == what.npos ? what : what.substr(cut + 2));
    return false;
  }

 private:
  enum class Kind { kUnsigned, kString, kObject, kArray, kOther };
  enum class Ctx { kTop, kMeta, kEntry, kShape, kOffsets };
  enum Field : unsigned { kDtype = 1, kShapeField = 2, kOffsetsField = 4 };

  bool Value(Kind kind, const std::string& desc);
  bool Fail(std::string m) {
    error = std::move(m);
    return false;
  }
  std::string T() const { return "tensor " + Quote(cur_.name) + ": "; }

  std::vector<Ctx> ctx_;
  std::set<std::string> top_keys_;
  std::string key_;       // current top-level key
  std::string meta_key_;  // current __metadata__ key
  RawEntry cur_;
  unsigned fields_ = 0;   // Field bits seen in cur_
  Field field_ = kDtype;  // field whose value comes next
  uint64_t uint_ = 0;
  std::string str_;
};

bool HeaderSax::key(string_t& k) {
  MLK_CHECK(!ctx_.empty(), "key outside an object");
  switch (ctx_.back()) {
    case Ctx::kTop:
      if (!top_keys_.insert(k).second) return Fail("header has duplicate key " + Quote(k));
      key_ = k;
      return true;
    case Ctx::kMeta:
      if (metadata.count(k)) return Fail("__metadata__ has duplicate key " + Quote(k));
      meta_key_ = k;
      return true;
    case Ctx::kEntry:
      if (k == "dtype") field_ = kDtype;
      else if (k == "shape") field_ = kShapeField;
      else if (k == "data_offsets") field_ = kOffsetsField;
      else return Fail(T() + "unknown field " + Quote(k) + "; an entry has exactly dtype, shape and data_offsets");
      if (fields_ & field_) return Fail(T() + "duplicate field " + Quote(k));
      fields_ |= field_;
      return true;
    default:
      MLK_CHECK(false, "key inside an array");
      return false;
  }
}

bool HeaderSax::Value(Kind kind, const std::string& desc) {
  if (ctx_.empty()) {  // the root; File::Parse already checked it starts with '{'
    if (kind != Kind::kObject) return Fail("header must be a JSON object, got " + desc);
    ctx_.push_back(Ctx::kTop);
    return true;
  }
  switch (ctx_.back()) {
    case Ctx::kTop:
      if (key_ == "__metadata__") {
        if (kind != Kind::kObject) return Fail("__metadata__ must be an object mapping strings to strings, got " + desc);
        ctx_.push_back(Ctx::kMeta);
        return true;
      }
      cur_ = RawEntry{key_, DType::U8, {}, {}};
      fields_ = 0;
      if (kind != Kind::kObject) return Fail(T() + "entry must be an object with dtype, shape and data_offsets, got " + desc);
      ctx_.push_back(Ctx::kEntry);
      return true;
    case Ctx::kMeta:
      if (kind != Kind::kString) return Fail("__metadata__ value for key " + Quote(meta_key_) + " must be a string, got " + desc);
      metadata.emplace(meta_key_, str_);
      return true;
    case Ctx::kEntry:
      if (field_ == kDtype) {
        if (kind != Kind::kString) return Fail(T() + "dtype must be a string, got " + desc);
        const auto d = parse_dtype(str_);
        if (!d) return Fail(T() + "unknown dtype " + Quote(str_));
        cur_.dtype = *d;
        return true;
      }
      if (kind != Kind::kArray) {
        return Fail(T() + (field_ == kShapeField ? "shape must be an array of non-negative integers, got "
                                                 : "data_offsets must be an array [BEGIN, END], got ") + desc);
      }
      ctx_.push_back(field_ == kShapeField ? Ctx::kShape : Ctx::kOffsets);
      return true;
    case Ctx::kShape:
      if (kind != Kind::kUnsigned) {
        return Fail(T() + "shape dimension " + std::to_string(cur_.shape.size()) + " is " + desc +
                    "; dimensions must be non-negative integers below 2^64");
      }
      cur_.shape.push_back(uint_);
      return true;
    case Ctx::kOffsets:
      if (kind != Kind::kUnsigned) return Fail(T() + "data_offsets must be non-negative integers below 2^64, got " + desc);
      if (cur_.offsets.size() == 2) return Fail(T() + "data_offsets must hold exactly 2 integers [BEGIN, END], got more");
      cur_.offsets.push_back(uint_);
      return true;
  }
  return false;
}

bool HeaderSax::end_object() {
  if (ctx_.back() == Ctx::kEntry) {
    for (auto [bit, name] : {std::pair{kDtype, "dtype"}, {kShapeField, "shape"}, {kOffsetsField, "data_offsets"}})
      if (!(fields_ & bit)) return Fail(T() + "missing field \"" + name + "\"");
    entries.push_back(std::move(cur_));
  }
  ctx_.pop_back();
  return true;
}

bool HeaderSax::end_array() {
  if (ctx_.back() == Ctx::kOffsets && cur_.offsets.size() != 2)
    return Fail(T() + "data_offsets must hold exactly 2 integers [BEGIN, END], got " + std::to_string(cur_.offsets.size()));
  ctx_.pop_back();
  return true;
}

// Bytes for `shape` of `d`: R7 (checked left-to-right product, as the reference
// does) and R8 (whole bytes). On failure returns nullopt with `why` set.
template <typename Int>
std::optional<uint64_t> TensorBytes(DType d, const std::vector<Int>& shape, std::string* why) {
  uint64_t elems = 1, bits = 0;
  bool overflow = false;
  for (Int dim : shape) overflow = overflow || __builtin_mul_overflow(elems, static_cast<uint64_t>(dim), &elems);
  if (overflow || __builtin_mul_overflow(elems, static_cast<uint64_t>(dtype_bits(d)), &bits)) {
    *why = ShapeText(d, shape) + " overflows: its size in bits does not fit in 64 bits";
    return std::nullopt;
  }
  if (bits % 8 != 0) {
    *why = ShapeText(d, shape) + " holds " + std::to_string(bits) + " bits, not a whole number of bytes";
    return std::nullopt;
  }
  return bits / 8;
}

uint64_t LoadLE64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::string_view dtype_name(DType d) { return Info(d).name; }
int dtype_bits(DType d) { return Info(d).bits; }
size_t dtype_alignment(DType d) { return Info(d).alignment; }
std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : kDTypes)
    if (i.name == name) return i.dtype;
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Reader

struct File::Storage {
  std::vector<uint8_t> owned;
  void* map = nullptr;
  size_t map_len = 0;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  ~Storage() {
    if (map != nullptr) munmap(map, map_len);
  }
};

File::File() = default;
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

const TensorView* File::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorView& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

Expected<File> File::FromBytes(std::vector<uint8_t> bytes) {
  auto st = std::make_unique<Storage>();
  st->owned = std::move(bytes);
  st->data = st->owned.data();
  st->size = st->owned.size();
  return Parse(std::move(st), "");
}

Expected<File> File::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    std::string m = Prefix(path) + "cannot open: " + std::strerror(e);
    return e == ENOENT ? Status::NotFound(m) : Status::IOError(m);
  }
  auto st = std::make_unique<Storage>();
  struct stat sb {};
  std::string err;
  if (fstat(fd, &sb) != 0) err = std::string("cannot stat: ") + std::strerror(errno);
  else if (!S_ISREG(sb.st_mode)) err = "not a regular file";
  else st->size = static_cast<uint64_t>(sb.st_size);
  if (err.empty() && st->size >= 8) {  // smaller files fail R1 without a mapping
    void* m = mmap(nullptr, st->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) err = std::string("cannot mmap: ") + std::strerror(errno);
    else st->map = m, st->map_len = st->size, st->data = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  if (!err.empty()) return Status::IOError(Prefix(path) + err);
  return Parse(std::move(st), path);
}

Expected<File> File::Parse(std::unique_ptr<Storage> st, const std::string& where) {
  auto fail = [&](const std::string& m) { return Status::Corruption(Prefix(where) + m); };
  const uint64_t size = st->size;
  if (size < 8) return fail("file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");  // R1
  const uint64_t n = LoadLE64(st->data);
  if (n > kMaxHeaderBytes)  // R2
    return fail("header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeaderBytes) + " bytes");
  if (n > size - 8)  // R3
    return fail("header length " + std::to_string(n) + " runs past the end of the " + std::to_string(size) + "-byte file");
  const std::string_view header(reinterpret_cast<const char*>(st->data) + 8, n);
  if (const size_t bad = Utf8ErrorOffset(header); bad != header.npos)  // R4
    return fail("header is not valid UTF-8 (invalid byte at header offset " + std::to_string(bad) + ")");
  // The spec says the header MUST begin with '{'. We choose to reject leading
  // whitespace, which the reference accepts; trailing 0x20 padding is fine.
  if (n == 0 || header[0] != '{')
    return fail("header must begin with \"{\" (leading whitespace is not allowed)");

  // nlohmann's lexer takes a NUL byte as the end of input and would ignore the
  // rest; JSON never allows a raw NUL, so reject it here.
  if (const size_t nul = header.find('\0'); nul != header.npos)
    return fail("header is not valid JSON: NUL byte at header offset " + std::to_string(nul));

  HeaderSax sax;  // R5 plus duplicate keys, unknown/missing fields
  bool parsed = false;
  try {
    parsed = nlohmann::json::sax_parse(header.begin(), header.end(), &sax);
  } catch (const std::exception& e) {  // the SAX path should not throw; be safe
    if (sax.error.empty()) sax.error = std::string("header is not valid JSON: ") + e.what();
  }
  if (!parsed) return fail(sax.error);

  std::vector<RawEntry>& entries = sax.entries;
  std::sort(entries.begin(), entries.end(), [](const RawEntry& a, const RawEntry& b) {
    return std::tie(a.offsets[0], a.offsets[1], a.name) < std::tie(b.offsets[0], b.offsets[1], b.name);
  });
  const uint8_t* buffer = st->data + 8 + n;
  const uint64_t buffer_size = size - 8 - n;
  uint64_t end = 0;
  const RawEntry* prev = nullptr;
  std::vector<TensorView> views;
  views.reserve(entries.size());
  for (RawEntry& e : entries) {
    auto t = [&e] { return "tensor " + Quote(e.name) + ": "; };  // built only on failure
    const uint64_t b = e.offsets[0], f = e.offsets[1];
    auto range = [b, f] { return "data_offsets [" + std::to_string(b) + ", " + std::to_string(f) + ")"; };
    if (f < b) return fail(t() + range() + " end before they begin");  // R6
    if (b != end) {
      if (prev == nullptr) return fail(t() + range() + " leave a gap: the first tensor must begin at 0");
      return fail(t() + range() + (b > end ? " leave a gap after" : " overlap") + " tensor " + Quote(prev->name) +
                  ", which ends at " + std::to_string(end));
    }
    std::string why;
    const std::optional<uint64_t> need = TensorBytes(e.dtype, e.shape, &why);  // R7, R8
    if (!need) return fail(t() + why);
    if (f - b != *need)  // R9
      return fail(t() + range() + " hold " + std::to_string(f - b) + " bytes but " + ShapeText(e.dtype, e.shape) +
                  " needs " + std::to_string(*need));
    for (size_t i = 0; i < e.shape.size(); ++i)
      if (e.shape[i] > static_cast<uint64_t>(INT64_MAX))
        return fail(t() + "shape dimension " + std::to_string(i) + " is " + std::to_string(e.shape[i]) + ", above 2^63-1");
    end = f;
    prev = &e;
    if (end > buffer_size) continue;  // R10 reports it below; never point past the file
    TensorView v{e.name, e.dtype, std::vector<int64_t>(e.shape.begin(), e.shape.end()), buffer + b, f - b, false};
    v.aligned = reinterpret_cast<uintptr_t>(v.data) % dtype_alignment(e.dtype) == 0;
    views.push_back(std::move(v));
  }
  if (end > buffer_size)  // R10
    return fail("file is truncated: tensor data ends at byte " + std::to_string(end) + " of the data buffer, which holds only " +
                std::to_string(buffer_size) + " bytes");
  if (end < buffer_size)
    return fail("file has " + std::to_string(buffer_size - end) + " trailing bytes after the last tensor's data");

  std::sort(views.begin(), views.end(), [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  File file;
  file.storage_ = std::move(st);
  file.tensors_ = std::move(views);
  file.metadata_ = std::move(sax.metadata);
  return file;
}

// ---------------------------------------------------------------------------
// Writer

namespace {

struct Plan {
  std::string prefix_and_header;  // u64 LE N followed by the padded header
  std::vector<const TensorToWrite*> order;
};

Expected<Plan> MakePlan(const std::vector<TensorToWrite>& tensors, const std::map<std::string, std::string>& metadata,
                        const std::string& where) {
  auto fail = [&](const std::string& m) { return Status::InvalidArgument(Prefix(where) + m); };
  std::set<std::string_view> names;
  Plan plan;
  for (const TensorToWrite& t : tensors) {
    const std::string tn = "tensor " + Quote(t.name) + ": ";
    if (Utf8ErrorOffset(t.name) != std::string_view::npos) return fail(tn + "name is not valid UTF-8");
    if (t.name == "__metadata__") return fail("\"__metadata__\" is reserved and cannot name a tensor");
    if (!names.insert(t.name).second) return fail(tn + "name is used twice");
    for (int64_t d : t.shape)
      if (d < 0) return fail(tn + "shape " + ShapeText(t.dtype, t.shape) + " has a negative dimension");
    std::string why;
    const std::optional<uint64_t> need = TensorBytes(t.dtype, t.shape, &why);
    if (!need) return fail(tn + why);
    if (t.data.size() != *need)
      return fail(tn + "data holds " + std::to_string(t.data.size()) + " bytes but " + ShapeText(t.dtype, t.shape) +
                  " needs " + std::to_string(*need));
    plan.order.push_back(&t);
  }
  for (const auto& [k, v] : metadata)
    if (Utf8ErrorOffset(k) != std::string_view::npos || Utf8ErrorOffset(v) != std::string_view::npos)
      return fail("__metadata__ entry " + Quote(k) + " is not valid UTF-8");
  std::sort(plan.order.begin(), plan.order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    const size_t aa = dtype_alignment(a->dtype), ba = dtype_alignment(b->dtype);
    return aa != ba ? aa > ba : a->name < b->name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite* t : plan.order) {
    const uint64_t end = offset + t->data.size();
    header[t->name] = {{"dtype", dtype_name(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();  // strings were checked to be UTF-8, so this cannot throw
  text.resize((text.size() + 7) / 8 * 8, ' ');
  if (text.size() > kMaxHeaderBytes) return fail("header would be " + std::to_string(text.size()) + " bytes, above the limit");
  plan.prefix_and_header.resize(8);
  for (int i = 0; i < 8; ++i) plan.prefix_and_header[i] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  plan.prefix_and_header += text;
  return plan;
}

bool WriteAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) errno = EIO;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

Expected<std::vector<uint8_t>> Serialize(const std::vector<TensorToWrite>& tensors,
                                         const std::map<std::string, std::string>& metadata) {
  Expected<Plan> plan = MakePlan(tensors, metadata, "");
  if (!plan.ok()) return plan.status();
  std::vector<uint8_t> out(plan->prefix_and_header.begin(), plan->prefix_and_header.end());
  for (const TensorToWrite* t : plan->order) out.insert(out.end(), t->data.begin(), t->data.end());
  return out;
}

Status Write(const std::string& path, const std::vector<TensorToWrite>& tensors,
             const std::map<std::string, std::string>& metadata) {
  Expected<Plan> plan = MakePlan(tensors, metadata, path);
  if (!plan.ok()) return plan.status();
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return Status::IOError(Prefix(path) + "cannot create a temporary file: " + std::strerror(errno));

  const auto& h = plan->prefix_and_header;
  std::string err;
  if (!WriteAll(fd, reinterpret_cast<const uint8_t*>(h.data()), h.size())) err = "cannot write";
  for (const TensorToWrite* t : plan->order)
    if (err.empty() && !WriteAll(fd, t->data.data(), t->data.size())) err = "cannot write";
  if (err.empty() && ::fsync(fd) != 0) err = "cannot sync";
  if (!err.empty()) err += std::string(": ") + std::strerror(errno);
  if (::close(fd) != 0 && err.empty()) err = std::string("cannot close: ") + std::strerror(errno);
  if (err.empty() && ::rename(tmp.c_str(), path.c_str()) != 0)
    err = std::string("cannot rename into place: ") + std::strerror(errno);
  if (!err.empty()) {
    ::unlink(tmp.c_str());
    return Status::IOError(Prefix(path) + err + " (temporary file " + tmp + " removed)");
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Status::IOError(Prefix(path) + "cannot open the directory to sync it: " + std::strerror(errno));
  const bool synced = ::fsync(dfd) == 0;
  const int sync_errno = errno;
  ::close(dfd);
  if (!synced) return Status::IOError(Prefix(path) + "cannot sync the directory: " + std::strerror(sync_errno));
  return Status::Ok();
}

}  // namespace mlk::safetensors
