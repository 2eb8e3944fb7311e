// `mlk run --inputs`: safetensors files and Arrow IPC streams to the fn's
// parameters (interop/run_inputs.h).
#include "interop/run_inputs.h"

#include "interop/arrow_reader.h"
#include "interop/arrow_schema.h"
#include "interop/tensor_files.h"

namespace mlk::inputs {

namespace {

const ir::Param* find_param(const ir::Function& f, const std::string& name) {
  for (const auto& p : f.params)
    if (p.name == name) return &p;
  return nullptr;
}

std::string param_names(const ir::Function& f) {
  std::string names;
  for (const auto& p : f.params) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

// The column a parameter declares: Tensor[T, [N]] is a T column and
// Tensor[T, [N, D]] a FixedSizeList[T, D] column (of any size while D is not
// known yet; binding the dims checks it against the other inputs).
Expected<arrow_ipc::ColumnDecl> column_of(const std::string& path, const ir::Function& f, const ir::Param& p,
                                          const std::map<std::string, int64_t>& dims) {
  const size_t rank = p.type.shape.size();
  if (rank != 1 && rank != 2)
    return Status::InvalidArgument(path + ": column `" + p.name + "` cannot bind parameter `" + p.name + "` of `" +
                                   f.name + "`, a " + p.type.str() +
                                   ": a column binds a Tensor of rank 1 ([N]) or 2 ([N, D], a FixedSizeList column)");
  arrow_ipc::ColumnDecl c;
  c.name = p.name;
  c.dtype = p.type.dtype;
  if (rank == 2) {
    std::optional<int64_t> d = p.type.shape[1].eval(dims);
    if (d) c.list_size = *d;
    else c.any_list_size = true;
  }
  arrow_ipc::SchemaDecl one;
  one.columns.push_back(c);
  if (Status s = arrow_ipc::validate_decl(one); !s.ok())
    return Status::InvalidArgument(path + ": column `" + p.name + "` cannot bind parameter `" + p.name + "` (" +
                                   p.type.str() + "): columns are I32, I64, F16, BF16, F32, F64 or Bool");
  return c;
}

// What `mlk run` did with a stream's data: it is read once into memory and
// each column copied once into its input tensor (the kernels take tensors of
// their own, so the Arrow memory is never used in place).
std::string copy_note(const std::string& path, const arrow_ipc::Table& t) {
  return path + ": " + std::to_string(t.rows) + " rows in " + std::to_string(t.batches) + " record batch" +
         (t.batches == 1 ? "" : "es") + ", " + std::to_string(t.columns.size()) + " column" +
         (t.columns.size() == 1 ? "" : "s") + " copied into the input tensors (read once, copied once; not used in place)";
}

// The tensors of one stream, by column name.
Expected<std::map<std::string, HostTensor>> read_stream_inputs(const std::string& path, const ir::Function& f,
                                                               const std::map<std::string, int64_t>& dims,
                                                               std::vector<std::string>* notes) {
  arrow_ipc::DeclareFn declare = [&](const std::vector<std::string>& names) -> Expected<arrow_ipc::SchemaDecl> {
    arrow_ipc::SchemaDecl decl;
    for (const auto& name : names) {
      const ir::Param* p = find_param(f, name);
      if (p == nullptr)
        return Status::InvalidArgument(path + ": column `" + name + "` matches no parameter of `" + f.name +
                                       "` (parameters: " + param_names(f) + ")");
      auto c = column_of(path, f, *p, dims);
      if (!c.ok()) return c.status();
      decl.columns.push_back(std::move(*c));
    }
    return decl;
  };
  auto table = arrow_ipc::read_stream_file(path, declare);
  if (!table.ok()) return table.status();
  if (notes != nullptr) notes->push_back(copy_note(path, *table));
  std::map<std::string, HostTensor> out;
  for (auto& col : table->columns) out[col.name] = std::move(col.values);
  return out;
}

// The Dataframe parameter a stream binds: the one named by `NAME=` in
// `spec`, else the fn's only one; `path` is the file.
Expected<const ir::Frame*> frame_for(const std::string& spec, const ir::Function& f, std::string& path) {
  path = spec;
  size_t eq = spec.find('=');
  if (eq != std::string::npos)
    for (const auto& fr : f.frames)
      if (fr.name == spec.substr(0, eq)) {
        path = spec.substr(eq + 1);
        return &fr;
      }
  if (f.frames.size() == 1) return &f.frames[0];
  std::string names;
  for (const auto& fr : f.frames) names += (names.empty() ? "" : ", ") + fr.name;
  return Status::InvalidArgument(spec + ": `" + f.name + "` has " + std::to_string(f.frames.size()) +
                                 " Dataframe parameters (" + names + "); say which this stream binds: --inputs NAME=" +
                                 spec);
}

// The column tensors of the Dataframe parameter a stream binds, by parameter
// name (`df.col`); the stream is read against the declaration the type makes.
Expected<std::map<std::string, HostTensor>> read_frame_inputs(const std::string& spec, const ir::Function& f,
                                                              const std::map<std::string, int64_t>& dims,
                                                              std::vector<std::string>* notes,
                                                              std::map<std::string, int64_t>& bound) {
  std::string path;
  auto fr = frame_for(spec, f, path);
  if (!fr.ok()) return fr.status();
  auto table = arrow_ipc::read_stream_file(path, arrow_ipc::schema_of(**fr, dims));
  if (!table.ok()) return table.status();
  bound.insert(table->dims.begin(), table->dims.end());
  if (notes != nullptr) notes->push_back(copy_note(path, *table));
  std::map<std::string, HostTensor> out;
  for (size_t i = 0; i < (*fr)->columns.size(); ++i) {
    const ir::FrameColumn& c = (*fr)->columns[i];
    if (c.param >= 0) out[f.params[static_cast<size_t>(c.param)].name] = std::move(table->columns[i].values);
  }
  return out;
}

// The Dataframe parameter whose column parameter `i` is, or nullptr.
const ir::Frame* frame_of_param(const ir::Function& f, size_t i) {
  for (const auto& fr : f.frames)
    for (const auto& c : fr.columns)
      if (c.param == static_cast<int>(i)) return &fr;
  return nullptr;
}

// `dims` with the dimensions the shapes of safetensors inputs give (an axis
// whose extent is a dimension variable), for the streams' rules and list
// sizes; a disagreement is left to bind_dims, which names both sides.
std::map<std::string, int64_t> with_tensor_dims(std::map<std::string, int64_t> dims, const ir::Function& f,
                                                const std::map<std::string, HostTensor>& tensors) {
  for (const auto& p : f.params) {
    auto it = tensors.find(p.name);
    if (it == tensors.end() || it->second.shape.size() != p.type.shape.size()) continue;
    for (size_t a = 0; a < p.type.shape.size(); ++a)
      for (const auto& v : f.dim_vars)
        if (p.type.shape[a] == Dim::var(v)) dims.emplace(v, it->second.shape[a]);
  }
  return dims;
}

}  // namespace

bool is_arrow_stream(const std::string& path) {
  const std::string ext = ".arrows";
  return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

Expected<std::vector<HostTensor>> read_run_inputs(const std::vector<std::string>& files, const ir::Function& f,
                                                  std::map<std::string, int64_t>& dims,
                                                  std::vector<std::string>* notes) {
  std::map<std::string, int64_t> bound;  // by the Dataframes' streams
  std::map<std::string, HostTensor> by_name;
  std::map<std::string, std::string> source;  // parameter -> the file that gave it
  // With Dataframes, safetensors files first: their shapes give dims the
  // streams' rules and list sizes use.
  std::vector<std::string> ordered;
  for (const auto& path : files)
    if (f.frames.empty() || !is_arrow_stream(path)) ordered.push_back(path);
  for (const auto& path : files)
    if (!f.frames.empty() && is_arrow_stream(path)) ordered.push_back(path);
  for (const auto& path : ordered) {
    auto tensors = !is_arrow_stream(path) ? read_safetensors(path)
                   : f.frames.empty()      ? read_stream_inputs(path, f, dims, notes)
                                           : read_frame_inputs(path, f, with_tensor_dims(dims, f, by_name), notes, bound);
    if (!tensors.ok()) return tensors.status();
    const char* what = is_arrow_stream(path) ? "column" : "tensor";
    for (auto& [name, t] : *tensors) {
      if (find_param(f, name) == nullptr)
        return Status::InvalidArgument(path + ": " + what + " \"" + name + "\" matches no parameter of `" + f.name +
                                       "` (parameters: " + param_names(f) + ")");
      if (auto it = source.find(name); it != source.end())
        return Status::InvalidArgument("parameter `" + name + "` of `" + f.name + "` is given twice: by " + it->second +
                                       " and by " + path);
      source[name] = path;
      by_name[name] = std::move(t);
    }
  }
  // Only the fn's dimensions no input's shape shows (a Category's K): the
  // streams' others are shapes already, or a constant row count's text.
  for (const std::string& d : f.unbound_dims())
    if (auto it = bound.find(d); it != bound.end()) dims.emplace(d, it->second);  // keeps a value dims has
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < f.params.size(); ++i) {
    const ir::Param& p = f.params[i];
    auto it = by_name.find(p.name);
    if (const ir::Frame* fr = frame_of_param(f, i); it == by_name.end() && fr != nullptr)
      return Status::InvalidArgument("no --inputs stream gives Dataframe parameter `" + fr->name + "` of `" + f.name +
                                     "` (give it as --inputs TABLE.arrows)");
    if (it == by_name.end()) {
      std::string where = files.size() != 1            ? "no --inputs file has a tensor or column"
                          : is_arrow_stream(files[0]) ? files[0] + " has no column"
                                                      : files[0] + " has no tensor";
      return Status::InvalidArgument(where + " \"" + p.name + "\" for parameter `" + p.name + "` of `" + f.name + "`");
    }
    inputs.push_back(std::move(it->second));
  }
  return inputs;
}

}  // namespace mlk::inputs
