// The reference interpreter's reductions and structural kernels (kSum ..
// kSlice): reductions accumulate in double for floats and wrap for integers,
// and round once to the dtype (docs/numerics.md). Which op runs which kernel
// is lang/ops.def's KERNEL column.
#include <cmath>
#include <limits>

#include "lang/compare.h"
#include "lang/interpreter_ops.h"
#include "lang/tensor.h"

namespace mlk::interp {
namespace {

using ir::Op;

Shape64 strides_of(const Shape64& s) {
  Shape64 st(s.size(), 1);
  for (size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}

int64_t product(const Shape64& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t k = from; k < to; ++k) p *= s[k];
  return p;
}

// Calls fn(flat_out, flat_in) for every element of a value of shape `out`,
// where the input's flat index is sum over k of idx[k] * in_stride[k].
template <typename Fn>
void walk(const Shape64& out, const Shape64& in_stride, Fn fn) {
  int64_t total = product(out, 0, out.size());
  Shape64 idx(out.size(), 0);
  int64_t in = 0;
  for (int64_t flat = 0; flat < total; ++flat) {
    fn(flat, in);
    for (size_t k = out.size(); k-- > 0;) {  // odometer increment
      if (++idx[k] < out[k]) {
        in += in_stride[k];
        break;
      }
      in -= (out[k] - 1) * in_stride[k];
      idx[k] = 0;
    }
  }
}

// The operand's axis `ints[0]` (checked against its rank).
size_t the_axis(const ir::Node& n, const Value& x) {
  MLK_CHECK(n.ints.size() == 1 && n.ints[0] >= 0 && n.ints[0] < static_cast<int64_t>(x.shape.size()), "axis");
  return static_cast<size_t>(n.ints[0]);
}

Expected<int64_t> eval_attr(const Dim& d, const DimEnv& env, const char* what) {
  auto v = d.eval(env);
  if (!v) return Status::InvalidArgument(std::string(what) + " `" + d.str() + "` cannot be evaluated here");
  return *v;
}

Value reduce(const ir::Node& n, const Value& x, const Shape64& shape) {
  Shape64 ostride(x.shape.size(), 0);
  Shape64 out_st = strides_of(shape);
  size_t next = 0;
  for (size_t k = 0; k < x.shape.size(); ++k) {
    bool reduced = false;
    for (int64_t a : n.ints) reduced = reduced || a == static_cast<int64_t>(k);
    if (!reduced) {
      MLK_CHECK(next < shape.size() && shape[next] == x.shape[k], "reduction result shape");
      ostride[k] = out_st[next++];
    }
  }
  MLK_CHECK(next == shape.size() && !n.ints.empty(), "reduction axes");
  Value out(x.dtype, shape);
  int64_t count = x.numel() / out.numel();
  if (x.floating()) {
    bool is_sum = n.op == Op::kSum || n.op == Op::kMean;
    double init = is_sum ? 0.0 : n.op == Op::kReduceMax ? -INFINITY : INFINITY;
    std::vector<double> acc(out.f.size(), init);
    walk(x.shape, ostride, [&](int64_t in, int64_t o) {
      double v = x.f[in];
      double& a = acc[o];
      if (is_sum) a += v;
      else if (std::isnan(v) || std::isnan(a)) a = NAN;  // NaN propagates through max/min
      else if (n.op == Op::kReduceMax ? v > a : v < a) a = v;
    });
    for (size_t o = 0; o < acc.size(); ++o)
      out.f[o] = round_to(x.dtype, n.op == Op::kMean ? acc[o] / static_cast<double>(count) : acc[o]);
    return out;
  }
  MLK_CHECK(n.op != Op::kMean, "mean of an integer dtype");
  std::vector<int64_t> acc(out.i.size(), n.op == Op::kSum         ? 0
                                         : n.op == Op::kReduceMax ? std::numeric_limits<int64_t>::min()
                                                                  : std::numeric_limits<int64_t>::max());
  walk(x.shape, ostride, [&](int64_t in, int64_t o) {
    int64_t v = x.i[in];
    if (n.op == Op::kSum) acc[o] = static_cast<int64_t>(static_cast<uint64_t>(acc[o]) + static_cast<uint64_t>(v));
    else if (n.op == Op::kReduceMax ? v > acc[o] : v < acc[o]) acc[o] = v;
  });
  for (size_t o = 0; o < acc.size(); ++o) out.i[o] = wrap_int(x.dtype, static_cast<uint64_t>(acc[o]));
  return out;
}

Value broadcast(const ir::Node& n, const Value& x, const Shape64& shape) {
  MLK_CHECK(n.ints.size() == x.shape.size(), "broadcast axes");
  Shape64 in_st = strides_of(x.shape), stride(shape.size(), 0);
  for (size_t i = 0; i < n.ints.size(); ++i) {
    MLK_CHECK(n.ints[i] >= 0 && n.ints[i] < static_cast<int64_t>(shape.size()) && shape[n.ints[i]] == x.shape[i],
              "broadcast axis");
    stride[n.ints[i]] = in_st[i];
  }
  Value out(x.dtype, shape);
  walk(shape, stride, [&](int64_t o, int64_t in) { out.copy_from(o, x, in); });
  return out;
}

// `dt`: the result's dtype, the operands' or F32 (a widening product).
Value matmul(const Value& a, const Value& b, const Shape64& shape, DType dt) {
  size_t ra = a.shape.size(), rb = b.shape.size();
  MLK_CHECK(ra >= 2 && rb >= 2 && a.dtype == b.dtype, "matmul operands");
  int64_t M = a.shape[ra - 2], K = a.shape[ra - 1], N = b.shape[rb - 1];
  int64_t batch = a.numel() / (M * K);
  bool batched_b = rb > 2;
  MLK_CHECK(b.shape[rb - 2] == K && (!batched_b || b.numel() == batch * K * N), "matmul shapes");
  MLK_CHECK(dt == a.dtype || (dt == DType::F32 && a.floating()), "matmul result dtype");
  Value out(dt, shape);
  MLK_CHECK(out.numel() == batch * M * N, "matmul result shape");
  for (int64_t p = 0; p < batch; ++p) {
    const int64_t a0 = p * M * K, b0 = batched_b ? p * K * N : 0, o0 = p * M * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < N; ++j) {
        if (a.floating()) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += a.f[a0 + m * K + k] * b.f[b0 + k * N + j];
          out.f[o0 + m * N + j] = round_to(dt, acc);
        } else {
          uint64_t acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += static_cast<uint64_t>(a.i[a0 + m * K + k]) * static_cast<uint64_t>(b.i[b0 + k * N + j]);
          out.i[o0 + m * N + j] = wrap_int(a.dtype, acc);
        }
      }
  }
  return out;
}

Value transpose(const ir::Node& n, const Value& x, const Shape64& shape) {
  MLK_CHECK(n.ints.size() == x.shape.size() && shape.size() == x.shape.size(), "transpose permutation");
  Shape64 in_st = strides_of(x.shape), stride(shape.size());
  for (size_t k = 0; k < shape.size(); ++k) {
    MLK_CHECK(n.ints[k] >= 0 && n.ints[k] < static_cast<int64_t>(x.shape.size()) && shape[k] == x.shape[n.ints[k]],
              "transpose axis");
    stride[k] = in_st[n.ints[k]];
  }
  Value out(x.dtype, shape);
  walk(shape, stride, [&](int64_t o, int64_t in) { out.copy_from(o, x, in); });
  return out;
}

// Numerically stable: the maximum along the axis is subtracted before exp.
Value softmax(const ir::Node& n, const Value& x, const Shape64& shape) {
  size_t axis = the_axis(n, x);
  MLK_CHECK(x.floating() && x.shape == shape, "softmax operand");
  int64_t outer = product(shape, 0, axis), len = shape[axis], inner = product(shape, axis + 1, shape.size());
  Value out(x.dtype, shape);
  std::vector<double> e(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t s = 0; s < inner; ++s) {
      auto at = [&](int64_t j) { return (o * len + j) * inner + s; };
      double m = -INFINITY;
      for (int64_t j = 0; j < len; ++j) m = std::isnan(m) || std::isnan(x.f[at(j)]) ? NAN : std::max(m, x.f[at(j)]);
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) sum += e[j] = std::exp(x.f[at(j)] - m);
      for (int64_t j = 0; j < len; ++j) out.f[at(j)] = round_to(x.dtype, e[j] / sum);
    }
  return out;
}

Expected<Value> gather(const ir::Node& n, const Value& table, const Value& idx, const Shape64& shape) {
  size_t axis = the_axis(n, table);
  MLK_CHECK(!idx.floating() && shape.size() == table.shape.size() - 1 + idx.shape.size(), "gather operands");
  int64_t V = table.shape[axis];
  for (int64_t k = 0; k < idx.numel(); ++k)
    if (idx.i[k] < 0 || idx.i[k] >= V)
      return Status::InvalidArgument("gather index " + std::to_string(idx.i[k]) + " at idx" +
                                     multi_index_str(idx.shape, k) + " is outside [0, " + std::to_string(V) + ")");
  int64_t outer = product(table.shape, 0, axis), inner = product(table.shape, axis + 1, table.shape.size());
  int64_t ni = idx.numel();
  Value out(table.dtype, shape);
  MLK_CHECK(out.numel() == outer * ni * inner, "gather result shape");
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < ni; ++j)
      for (int64_t s = 0; s < inner; ++s) out.copy_from((o * ni + j) * inner + s, table, (o * V + idx.i[j]) * inner + s);
  return out;
}

// Copies x[o, from + j, s] to out[o, j / R, s] for j in [0, out.shape[axis]);
// the common core of slice (R = 1, from = start) and repeat_interleave.
Value along_axis(const Value& x, size_t axis, const Shape64& shape, int64_t from, int64_t repeats) {
  int64_t outer = product(shape, 0, axis), len = shape[axis], inner = product(shape, axis + 1, shape.size());
  int64_t in_len = x.shape[axis];
  Value out(x.dtype, shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < len; ++j)
      for (int64_t s = 0; s < inner; ++s)
        out.copy_from((o * len + j) * inner + s, x, (o * in_len + from + j / repeats) * inner + s);
  return out;
}

bool same_except(const Shape64& a, const Shape64& b, size_t axis) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (k != axis && a[k] != b[k]) return false;
  return true;
}

Value concat(const ir::Node& n, const std::vector<const Value*>& xs, const Shape64& shape) {
  MLK_CHECK(!xs.empty(), "concat of nothing");
  size_t axis = the_axis(n, *xs[0]);
  int64_t outer = product(shape, 0, axis), len = shape[axis], inner = product(shape, axis + 1, shape.size());
  Value out(xs[0]->dtype, shape);
  int64_t offset = 0;
  for (const Value* x : xs) {
    MLK_CHECK(x->dtype == out.dtype && same_except(x->shape, shape, axis), "concat operand");
    int64_t l = x->shape[axis];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < l * inner; ++k) out.copy_from((o * len + offset) * inner + k, *x, o * l * inner + k);
    offset += l;
  }
  MLK_CHECK(offset == len, "concat extents");
  return out;
}

}  // namespace

Expected<Value> kernel_reduce(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv&) {
  return reduce(n, *args[0], shape);
}

Expected<Value> kernel_broadcast(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv&) {
  return broadcast(n, *args[0], shape);
}

Expected<Value> kernel_matmul(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv&) {
  return matmul(*args[0], *args[1], shape, n.type.dtype);
}

Expected<Value> kernel_transpose(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv&) {
  return transpose(n, *args[0], shape);
}

Expected<Value> kernel_reshape(const ir::Node&, const Args& args, const Shape64& shape, const DimEnv&) {
  Value out = *args[0];
  out.shape = shape;
  MLK_CHECK(product(shape, 0, shape.size()) == out.numel(), "reshape element count");
  return out;
}

Expected<Value> kernel_softmax(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv&) {
  return softmax(n, *args[0], shape);
}

Expected<Value> kernel_gather(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv&) {
  return gather(n, *args[0], *args[1], shape);
}

Expected<Value> kernel_repeat_interleave(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env) {
  size_t axis = the_axis(n, *args[0]);
  MLK_CHECK(n.dims.size() == 1, "repeat_interleave repeats");
  auto r = eval_attr(n.dims[0], env, "`repeat_interleave` repeats");
  if (!r) return r.status();
  MLK_CHECK(*r >= 1 && same_except(args[0]->shape, shape, axis) && shape[axis] == args[0]->shape[axis] * *r,
            "repeat_interleave shape");
  return along_axis(*args[0], axis, shape, 0, *r);
}

Expected<Value> kernel_concat(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv&) {
  return concat(n, args, shape);
}

Expected<Value> kernel_slice(const ir::Node& n, const Args& args, const Shape64& shape, const DimEnv& env) {
  size_t axis = the_axis(n, *args[0]);
  MLK_CHECK(n.dims.size() == 2, "slice bounds");
  auto start = eval_attr(n.dims[0], env, "`slice` start");
  if (!start) return start.status();
  MLK_CHECK(*start >= 0 && same_except(args[0]->shape, shape, axis) && *start + shape[axis] <= args[0]->shape[axis],
            "slice bounds");
  return along_axis(*args[0], axis, shape, *start, 1);
}

}  // namespace mlk::interp
