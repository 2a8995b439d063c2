// Builds td modules from a parsed spec: PyTorch's constructor signatures, bound as Python does.
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "modules/modules.h"
#include "tools/tdvmap/model_spec.h"

namespace tdvmap {
namespace {

using td::nn::Module;
using ModulePtr = std::shared_ptr<Module>;
using Kind = SpecValue::Kind;

SpecValue none() { return {}; }
SpecValue int_v(int64_t i) {
  SpecValue v;
  v.kind = Kind::Int;
  v.i = i;
  return v;
}
SpecValue float_v(double f) {
  SpecValue v;
  v.kind = Kind::Float;
  v.f = f;
  return v;
}
SpecValue bool_v(bool b) {
  SpecValue v;
  v.kind = Kind::Bool;
  v.b = b;
  return v;
}
SpecValue str_v(const char* s) {
  SpecValue v;
  v.kind = Kind::String;
  v.s = s;
  return v;
}

struct ParamSpec {
  std::string name;
  std::optional<SpecValue> default_value;  // nullopt: required
};

class Args;
struct ModuleKind {
  std::vector<ParamSpec> params;
  bool variadic = false;  // Sequential(*modules), Identity(*args)
  std::function<ModulePtr(Args&)> make;
};

ModulePtr build(const SpecCall& call, const std::string& spec);

// The bound arguments of one call, with typed accessors that point at the value on error.
class Args {
 public:
  Args(const SpecCall& call, const ModuleKind& kind, const std::string& spec)
      : call_(call), spec_(spec) {
    size_t next = 0;
    for (const auto& a : call.args) {
      if (a.name.empty()) {
        if (kind.variadic) {
          positional_.push_back(a.value);
          continue;
        }
        if (next >= kind.params.size())
          fail(a.column, call.name + "() takes " + std::to_string(kind.params.size()) +
                             " arguments (" + names(kind) + ") but more were given");
        values_[kind.params[next++].name] = a.value;
        continue;
      }
      bool known = false;
      for (const auto& p : kind.params) known = known || p.name == a.name;
      if (!known)
        fail(a.column, call.name + "() got an unexpected keyword argument '" + a.name +
                           "' (arguments: " + names(kind) + ")");
      if (values_.count(a.name))
        fail(a.column, call.name + "() got multiple values for argument '" + a.name + "'");
      values_[a.name] = a.value;
    }
    for (const auto& p : kind.params) {
      if (values_.count(p.name)) continue;
      if (!p.default_value)
        fail(call.column, call.name + "() missing required argument '" + p.name + "'");
      SpecValue d = *p.default_value;
      d.column = call.column;
      values_[p.name] = d;
    }
  }

  [[noreturn]] void fail(size_t column, const std::string& what) const {
    throw SpecError("bad model spec: " + what, spec_, column);
  }
  const SpecValue& get(const std::string& name) const { return values_.at(name); }
  bool is_none(const std::string& name) const { return get(name).kind == Kind::None; }

  int64_t i(const std::string& name) const {
    const SpecValue& v = get(name);
    if (v.kind != Kind::Int) type_error(name, "an int", v);
    return v.i;
  }
  std::optional<int64_t> opt_i(const std::string& name) const {
    if (is_none(name)) return std::nullopt;
    return i(name);
  }
  double f(const std::string& name) const {
    const SpecValue& v = get(name);
    if (v.kind == Kind::Int) return static_cast<double>(v.i);
    if (v.kind != Kind::Float) type_error(name, "a number", v);
    return v.f;
  }
  bool b(const std::string& name) const {
    const SpecValue& v = get(name);
    if (v.kind != Kind::Bool) type_error(name, "True or False", v);
    return v.b;
  }
  std::string s(const std::string& name) const {
    const SpecValue& v = get(name);
    if (v.kind != Kind::String) type_error(name, "a string", v);
    return v.s;
  }
  // An int (repeated n times) or a tuple of n ints; n = 0 accepts any length.
  std::vector<int64_t> ints(const std::string& name, size_t n) const {
    const SpecValue& v = get(name);
    if (v.kind == Kind::Int) return std::vector<int64_t>(n ? n : 1, v.i);
    if (v.kind != Kind::Tuple || (n && v.items.size() != n))
      type_error(name,
                 n ? "an int or a tuple of " + std::to_string(n) + " ints" : "a tuple of ints", v);
    std::vector<int64_t> out;
    for (const auto& item : v.items) {
      if (item.kind != Kind::Int) type_error(name, "a tuple of ints", v);
      out.push_back(item.i);
    }
    return out;
  }
  // A kernel size, stride, ...: an int or a tuple of two.
  td::nn::Size2 size2(const std::string& name) const {
    std::vector<int64_t> v = ints(name, 2);
    td::nn::Size2 out(v[0]);
    out.w = v[1];
    out.pair = get(name).kind == Kind::Tuple;
    return out;
  }
  // Rejects a PyTorch argument td does not implement unless it has its default value.
  void require_default(const std::string& name, const SpecValue& def) const {
    const SpecValue& v = get(name);
    bool same = v.kind == def.kind && v.b == def.b && v.i == def.i && v.f == def.f && v.s == def.s;
    if (!same) fail(v.column, call_.name + "(" + name + "=...) is not supported by td");
  }
  // The nested modules of a variadic call.
  std::vector<ModulePtr> modules() const {
    std::vector<ModulePtr> out;
    for (const auto& v : positional_) {
      if (v.kind != Kind::Call)
        fail(v.column,
             call_.name + "() takes modules, e.g. " + call_.name + "(Linear(3, 1), ReLU())");
      out.push_back(build(*v.call, spec_));
    }
    return out;
  }
  // A module argument (a nested call such as LayerNorm(64)), or nullptr for None.
  ModulePtr module(const std::string& name) const {
    const SpecValue& v = get(name);
    if (v.kind == Kind::None) return nullptr;
    if (v.kind != Kind::Call) type_error(name, "a module, e.g. LayerNorm(16), or None", v);
    return build(*v.call, spec_);
  }
  const SpecCall& call() const { return call_; }

 private:
  static std::string names(const ModuleKind& kind) {
    std::string out;
    for (const auto& p : kind.params) out += (out.empty() ? "" : ", ") + p.name;
    return out.empty() ? "none" : out;
  }
  static std::string describe(const SpecValue& v) {
    switch (v.kind) {
      case Kind::None:
        return "None";
      case Kind::Bool:
        return v.b ? "True" : "False";
      case Kind::Int:
        return std::to_string(v.i);
      case Kind::Float:
        return std::to_string(v.f);
      case Kind::String:
        return "'" + v.s + "'";
      case Kind::Tuple:
        return "a tuple";
      case Kind::Call:
        return "a module";
    }
    return "?";
  }
  [[noreturn]] void type_error(const std::string& name, const std::string& want,
                               const SpecValue& v) const {
    fail(v.column,
         call_.name + "() argument '" + name + "' must be " + want + ", got " + describe(v));
  }

  const SpecCall& call_;
  const std::string& spec_;
  std::map<std::string, SpecValue> values_;
  std::vector<SpecValue> positional_;
};

template <class M, class... A>
ModulePtr make(A&&... a) {
  return std::make_shared<M>(std::forward<A>(a)...);
}

// torch's RNN and GRU take proj_size (RNNBase's) only to refuse it
void no_proj_size(const Args& a) {
  if (a.i("proj_size") != 0)
    a.fail(a.get("proj_size").column, "proj_size is only supported for LSTM, not RNN or GRU");
}

ModulePtr make_batchnorm(Args& a, bool two_d) {
  const int64_t n = a.i("num_features");
  const double eps = a.f("eps");
  const std::optional<double> momentum =
      a.is_none("momentum") ? std::nullopt : std::optional<double>(a.f("momentum"));
  const bool affine = a.b("affine"), track = a.b("track_running_stats");
  if (two_d) return make<td::nn::BatchNorm2d>(n, eps, momentum, affine, track);
  return make<td::nn::BatchNorm1d>(n, eps, momentum, affine, track);
}

// The loss modules, forward(input, target). A weight is a tensor, which a spec cannot hold: None
// only, as for torch's deprecated size_average and reduce.
void add_loss_kinds(std::map<std::string, ModuleKind>& t) {
  const auto nones = [](Args& a, std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (!a.is_none(n))
        a.fail(a.get(n).column, a.call().name + "() argument '" + n + "' must be None in a spec");
  };
  const ParamSpec size_average{"size_average", none()}, reduce{"reduce", none()},
      reduction{"reduction", str_v("mean")}, weight{"weight", none()},
      ignore_index{"ignore_index", int_v(-100)};
  t["MSELoss"] = {{size_average, reduce, reduction}, false, [=](Args& a) {
                    nones(a, {"size_average", "reduce"});
                    return make<td::nn::MSELoss>(a.s("reduction"));
                  }};
  t["L1Loss"] = {{size_average, reduce, reduction}, false, [=](Args& a) {
                   nones(a, {"size_average", "reduce"});
                   return make<td::nn::L1Loss>(a.s("reduction"));
                 }};
  t["SmoothL1Loss"] = {{size_average, reduce, reduction, {"beta", float_v(1.0)}}, false,
                       [=](Args& a) {
                         nones(a, {"size_average", "reduce"});
                         return make<td::nn::SmoothL1Loss>(a.s("reduction"), a.f("beta"));
                       }};
  t["HuberLoss"] = {{reduction, {"delta", float_v(1.0)}}, false, [](Args& a) {
                      return make<td::nn::HuberLoss>(a.s("reduction"), a.f("delta"));
                    }};
  t["CrossEntropyLoss"] = {
      {weight, size_average, ignore_index, reduce, reduction, {"label_smoothing", float_v(0.0)}},
      false, [=](Args& a) {
        nones(a, {"weight", "size_average", "reduce"});
        return make<td::nn::CrossEntropyLoss>(td::Tensor(), a.i("ignore_index"), a.s("reduction"),
                                              a.f("label_smoothing"));
      }};
  t["NLLLoss"] = {{weight, size_average, ignore_index, reduce, reduction}, false, [=](Args& a) {
                    nones(a, {"weight", "size_average", "reduce"});
                    return make<td::nn::NLLLoss>(td::Tensor(), a.i("ignore_index"),
                                                 a.s("reduction"));
                  }};
  t["BCELoss"] = {{weight, size_average, reduce, reduction}, false, [=](Args& a) {
                    nones(a, {"weight", "size_average", "reduce"});
                    return make<td::nn::BCELoss>(td::Tensor(), a.s("reduction"));
                  }};
  t["BCEWithLogitsLoss"] = {{weight, size_average, reduce, reduction, {"pos_weight", none()}},
                            false, [=](Args& a) {
                              nones(a, {"weight", "size_average", "reduce", "pos_weight"});
                              return make<td::nn::BCEWithLogitsLoss>(td::Tensor(),
                                                                     a.s("reduction"));
                            }};
  t["KLDivLoss"] = {{size_average, reduce, reduction, {"log_target", bool_v(false)}}, false,
                    [=](Args& a) {
                      nones(a, {"size_average", "reduce"});
                      return make<td::nn::KLDivLoss>(a.s("reduction"), a.b("log_target"));
                    }};
}

const std::map<std::string, ModuleKind>& kinds() {
  static const std::map<std::string, ModuleKind> table = [] {
    std::map<std::string, ModuleKind> t;
    const std::vector<ParamSpec> batchnorm = {{"num_features", std::nullopt},
                                              {"eps", float_v(1e-5)},
                                              {"momentum", float_v(0.1)},
                                              {"affine", bool_v(true)},
                                              {"track_running_stats", bool_v(true)}};
    t["Linear"] = {
        {{"in_features", std::nullopt}, {"out_features", std::nullopt}, {"bias", bool_v(true)}},
        false,
        [](Args& a) {
          return make<td::nn::Linear>(a.i("in_features"), a.i("out_features"), a.b("bias"));
        }};
    t["ReLU"] = {{{"inplace", bool_v(false)}}, false, [](Args&) { return make<td::nn::ReLU>(); }};
    t["GELU"] = {{{"approximate", str_v("none")}}, false, [](Args& a) {
                   return make<td::nn::GELU>(a.s("approximate"));
                 }};
    t["Tanh"] = {{}, false, [](Args&) { return make<td::nn::Tanh>(); }};
    t["Sigmoid"] = {{}, false, [](Args&) { return make<td::nn::Sigmoid>(); }};
    t["Softmax"] = {{{"dim", none()}}, false, [](Args& a) {
                      if (a.is_none("dim")) a.fail(a.call().column, "Softmax() needs dim");
                      return make<td::nn::Softmax>(a.i("dim"));
                    }};
    t["LogSoftmax"] = {{{"dim", none()}}, false, [](Args& a) {
                         if (a.is_none("dim")) a.fail(a.call().column, "LogSoftmax() needs dim");
                         return make<td::nn::LogSoftmax>(a.i("dim"));
                       }};
    t["Identity"] = {{}, true, [](Args&) { return make<td::nn::Identity>(); }};
    t["Flatten"] = {{{"start_dim", int_v(1)}, {"end_dim", int_v(-1)}}, false, [](Args& a) {
                      return make<td::nn::Flatten>(a.i("start_dim"), a.i("end_dim"));
                    }};
    t["Sequential"] = {{}, true, [](Args& a) {
                         auto seq = std::make_shared<td::nn::Sequential>();
                         for (auto& m : a.modules()) seq->push_back(m);
                         return ModulePtr(seq);
                       }};
    t["Dropout"] = {{{"p", float_v(0.5)}, {"inplace", bool_v(false)}}, false, [](Args& a) {
                      return make<td::nn::Dropout>(a.f("p"));
                    }};
    t["LayerNorm"] = {{{"normalized_shape", std::nullopt},
                       {"eps", float_v(1e-5)},
                       {"elementwise_affine", bool_v(true)}},
                      false,
                      [](Args& a) {
                        return make<td::nn::LayerNorm>(td::Shape(a.ints("normalized_shape", 0)),
                                                       a.f("eps"), a.b("elementwise_affine"));
                      }};
    t["BatchNorm1d"] = {batchnorm, false, [](Args& a) { return make_batchnorm(a, false); }};
    t["BatchNorm2d"] = {batchnorm, false, [](Args& a) { return make_batchnorm(a, true); }};
    // Conv1d's and Conv2d's arguments, as torch's
    const std::vector<ParamSpec> conv = {{"in_channels", std::nullopt},
                                         {"out_channels", std::nullopt},
                                         {"kernel_size", std::nullopt},
                                         {"stride", int_v(1)},
                                         {"padding", int_v(0)},
                                         {"dilation", int_v(1)},
                                         {"groups", int_v(1)},
                                         {"bias", bool_v(true)},
                                         {"padding_mode", str_v("zeros")}};
    t["Conv2d"] = {conv,
                   false,
                   [](Args& a) {
                     const td::nn::Padding2 padding = a.get("padding").kind == Kind::String
                                                          ? td::nn::Padding2(a.s("padding"))
                                                          : td::nn::Padding2(a.size2("padding"));
                     return make<td::nn::Conv2d>(a.i("in_channels"), a.i("out_channels"),
                                                 a.size2("kernel_size"), a.size2("stride"), padding,
                                                 a.size2("dilation"), a.i("groups"), a.b("bias"),
                                                 a.s("padding_mode"));
                   }};
    t["MaxPool2d"] = {{{"kernel_size", std::nullopt},
                       {"stride", none()},
                       {"padding", int_v(0)},
                       {"dilation", int_v(1)},
                       {"return_indices", bool_v(false)},
                       {"ceil_mode", bool_v(false)}},
                      false,
                      [](Args& a) {
                        std::optional<td::nn::Size2> stride;
                        if (!a.is_none("stride")) stride = a.size2("stride");
                        return make<td::nn::MaxPool2d>(a.size2("kernel_size"), stride,
                                                       a.size2("padding"), a.size2("dilation"),
                                                       a.b("ceil_mode"), a.b("return_indices"));
                      }};
    t["AvgPool2d"] = {{{"kernel_size", std::nullopt},
                       {"stride", none()},
                       {"padding", int_v(0)},
                       {"ceil_mode", bool_v(false)},
                       {"count_include_pad", bool_v(true)},
                       {"divisor_override", none()}},
                      false,
                      [](Args& a) {
                        std::optional<td::nn::Size2> stride;
                        if (!a.is_none("stride")) stride = a.size2("stride");
                        std::optional<int64_t> divisor;
                        if (!a.is_none("divisor_override")) divisor = a.i("divisor_override");
                        return make<td::nn::AvgPool2d>(a.size2("kernel_size"), stride,
                                                       a.size2("padding"), a.b("ceil_mode"),
                                                       a.b("count_include_pad"), divisor);
                      }};
    // Conv1d, the 1-D and adaptive pools, GroupNorm, InstanceNorm1d/2d
    t["Conv1d"] = {conv,
                   false,
                   [](Args& a) {
                     const td::nn::Padding1 padding =
                         a.get("padding").kind == Kind::String
                             ? td::nn::Padding1(a.s("padding"))
                             : td::nn::Padding1(a.ints("padding", 1)[0]);
                     return make<td::nn::Conv1d>(
                         a.i("in_channels"), a.i("out_channels"), a.ints("kernel_size", 1)[0],
                         a.ints("stride", 1)[0], padding, a.ints("dilation", 1)[0], a.i("groups"),
                         a.b("bias"), a.s("padding_mode"));
                   }};
    t["MaxPool1d"] = {{{"kernel_size", std::nullopt},
                       {"stride", none()},
                       {"padding", int_v(0)},
                       {"dilation", int_v(1)},
                       {"return_indices", bool_v(false)},
                       {"ceil_mode", bool_v(false)}},
                      false,
                      [](Args& a) {
                        std::optional<int64_t> stride;
                        if (!a.is_none("stride")) stride = a.ints("stride", 1)[0];
                        return make<td::nn::MaxPool1d>(
                            a.ints("kernel_size", 1)[0], stride, a.ints("padding", 1)[0],
                            a.ints("dilation", 1)[0], a.b("return_indices"), a.b("ceil_mode"));
                      }};
    t["AvgPool1d"] = {{{"kernel_size", std::nullopt},
                       {"stride", none()},
                       {"padding", int_v(0)},
                       {"ceil_mode", bool_v(false)},
                       {"count_include_pad", bool_v(true)}},
                      false,
                      [](Args& a) {
                        std::optional<int64_t> stride;
                        if (!a.is_none("stride")) stride = a.ints("stride", 1)[0];
                        return make<td::nn::AvgPool1d>(a.ints("kernel_size", 1)[0], stride,
                                                       a.ints("padding", 1)[0], a.b("ceil_mode"),
                                                       a.b("count_include_pad"));
                      }};
    t["AdaptiveAvgPool1d"] = {{{"output_size", std::nullopt}}, false, [](Args& a) {
                                return make<td::nn::AdaptiveAvgPool1d>(
                                    a.ints("output_size", 1)[0]);
                              }};
    // output_size: an int, or a tuple of two whose entries may be None
    auto adaptive2 = [](const Args& a) {
      const SpecValue& v = a.get("output_size");
      if (v.kind == Kind::Int) return td::nn::AdaptiveSize2(v.i);
      std::optional<int64_t> hw[2];
      if (v.kind != Kind::Tuple || v.items.size() != 2)
        a.fail(v.column, "output_size must be an int or a tuple of two ints or None");
      for (size_t k = 0; k < 2; ++k) {
        if (v.items[k].kind == Kind::Int)
          hw[k] = v.items[k].i;
        else if (v.items[k].kind != Kind::None)
          a.fail(v.column, "output_size must be an int or a tuple of two ints or None");
      }
      return td::nn::AdaptiveSize2(hw[0], hw[1]);
    };
    t["AdaptiveAvgPool2d"] = {{{"output_size", std::nullopt}}, false, [adaptive2](Args& a) {
                                return make<td::nn::AdaptiveAvgPool2d>(adaptive2(a));
                              }};
    t["AdaptiveMaxPool2d"] = {{{"output_size", std::nullopt}, {"return_indices", bool_v(false)}},
                              false,
                              [adaptive2](Args& a) {
                                a.require_default("return_indices", bool_v(false));
                                return make<td::nn::AdaptiveMaxPool2d>(adaptive2(a));
                              }};
    t["GroupNorm"] = {{{"num_groups", std::nullopt},
                       {"num_channels", std::nullopt},
                       {"eps", float_v(1e-5)},
                       {"affine", bool_v(true)}},
                      false,
                      [](Args& a) {
                        return make<td::nn::GroupNorm>(a.i("num_groups"), a.i("num_channels"),
                                                       a.f("eps"), a.b("affine"));
                      }};
    const std::vector<ParamSpec> instancenorm = {{"num_features", std::nullopt},
                                                 {"eps", float_v(1e-5)},
                                                 {"momentum", float_v(0.1)},
                                                 {"affine", bool_v(false)},
                                                 {"track_running_stats", bool_v(false)}};
    t["InstanceNorm1d"] = {instancenorm, false, [](Args& a) {
                             return make<td::nn::InstanceNorm1d>(a.i("num_features"), a.f("eps"),
                                                                 a.f("momentum"), a.b("affine"),
                                                                 a.b("track_running_stats"));
                           }};
    t["InstanceNorm2d"] = {instancenorm, false, [](Args& a) {
                             return make<td::nn::InstanceNorm2d>(a.i("num_features"), a.f("eps"),
                                                                 a.f("momentum"), a.b("affine"),
                                                                 a.b("track_running_stats"));
                           }};
    t["Embedding"] = {{{"num_embeddings", std::nullopt},
                       {"embedding_dim", std::nullopt},
                       {"padding_idx", none()},
                       {"max_norm", none()},
                       {"norm_type", float_v(2.0)},
                       {"scale_grad_by_freq", bool_v(false)},
                       {"sparse", bool_v(false)}},
                      false,
                      [](Args& a) {
                        std::optional<double> max_norm;
                        if (!a.is_none("max_norm")) max_norm = a.f("max_norm");
                        return make<td::nn::Embedding>(a.i("num_embeddings"), a.i("embedding_dim"),
                                                       a.opt_i("padding_idx"), max_norm,
                                                       a.f("norm_type"));
                      }};
    t["MultiheadAttention"] = {{{"embed_dim", std::nullopt},
                                {"num_heads", std::nullopt},
                                {"dropout", float_v(0.0)},
                                {"bias", bool_v(true)},
                                {"add_bias_kv", bool_v(false)},
                                {"add_zero_attn", bool_v(false)},
                                {"kdim", none()},
                                {"vdim", none()},
                                {"batch_first", bool_v(false)}},
                               false,
                               [](Args& a) {
                                 return make<td::nn::MultiheadAttention>(
                                     a.i("embed_dim"), a.i("num_heads"), a.f("dropout"),
                                     a.b("bias"), a.b("batch_first"), a.b("add_bias_kv"),
                                     a.b("add_zero_attn"), a.opt_i("kdim"), a.opt_i("vdim"));
                               }};
    // torch's RNN takes nonlinearity fourth; LSTM and GRU take RNNBase's order
    std::vector<ParamSpec> rnn = {{"input_size", std::nullopt},     {"hidden_size", std::nullopt},
                                  {"num_layers", int_v(1)},         {"bias", bool_v(true)},
                                  {"batch_first", bool_v(false)},   {"dropout", float_v(0.0)},
                                  {"bidirectional", bool_v(false)}, {"proj_size", int_v(0)}};
    t["LSTM"] = {rnn, false, [](Args& a) {
                   return make<td::nn::LSTM>(
                       a.i("input_size"), a.i("hidden_size"), a.i("num_layers"), a.b("bias"),
                       a.b("batch_first"), a.f("dropout"), a.b("bidirectional"), a.i("proj_size"));
                 }};
    t["GRU"] = {rnn, false, [](Args& a) {
                  no_proj_size(a);
                  return make<td::nn::GRU>(a.i("input_size"), a.i("hidden_size"), a.i("num_layers"),
                                           a.b("bias"), a.b("batch_first"), a.f("dropout"),
                                           a.b("bidirectional"));
                }};
    rnn.insert(rnn.begin() + 3, {"nonlinearity", str_v("tanh")});
    t["RNN"] = {rnn, false, [](Args& a) {
                  no_proj_size(a);
                  return make<td::nn::RNN>(a.i("input_size"), a.i("hidden_size"), a.i("num_layers"),
                                           a.s("nonlinearity"), a.b("bias"), a.b("batch_first"),
                                           a.f("dropout"), a.b("bidirectional"));
                }};
    t["TransformerEncoderLayer"] = {{{"d_model", std::nullopt},
                                     {"nhead", std::nullopt},
                                     {"dim_feedforward", int_v(2048)},
                                     {"dropout", float_v(0.1)},
                                     {"activation", str_v("relu")},
                                     {"layer_norm_eps", float_v(1e-5)},
                                     {"batch_first", bool_v(false)},
                                     {"norm_first", bool_v(false)}},
                                    false,
                                    [](Args& a) {
                                      return make<td::nn::TransformerEncoderLayer>(
                                          a.i("d_model"), a.i("nhead"), a.i("dim_feedforward"),
                                          a.f("dropout"), a.s("activation"), a.f("layer_norm_eps"),
                                          a.b("batch_first"), a.b("norm_first"));
                                    }};
    // enable_nested_tensor and mask_check choose torch's fast path only, not td's results
    t["TransformerEncoder"] = {
        {{"encoder_layer", std::nullopt},
         {"num_layers", std::nullopt},
         {"norm", none()},
         {"enable_nested_tensor", bool_v(true)},
         {"mask_check", bool_v(true)}},
        false,
        [](Args& a) {
          a.b("enable_nested_tensor");
          a.b("mask_check");
          auto layer =
              std::dynamic_pointer_cast<td::nn::TransformerEncoderLayer>(a.module("encoder_layer"));
          if (!layer)
            a.fail(a.get("encoder_layer").column,
                   "TransformerEncoder() argument 'encoder_layer' must be a "
                   "TransformerEncoderLayer(...)");
          return make<td::nn::TransformerEncoder>(*layer, a.i("num_layers"), a.module("norm"));
        }};
    // activations (inplace accepted; td's forward always returns a new tensor)
    const std::vector<ParamSpec> inplace = {{"inplace", bool_v(false)}};
    t["SiLU"] = {inplace, false, [](Args& a) { return make<td::nn::SiLU>(a.b("inplace")); }};
    t["Mish"] = {inplace, false, [](Args& a) { return make<td::nn::Mish>(a.b("inplace")); }};
    t["SELU"] = {inplace, false, [](Args& a) { return make<td::nn::SELU>(a.b("inplace")); }};
    t["ReLU6"] = {inplace, false, [](Args& a) { return make<td::nn::ReLU6>(a.b("inplace")); }};
    t["Hardswish"] = {inplace, false,
                      [](Args& a) { return make<td::nn::Hardswish>(a.b("inplace")); }};
    t["Hardsigmoid"] = {inplace, false,
                        [](Args& a) { return make<td::nn::Hardsigmoid>(a.b("inplace")); }};
    t["LeakyReLU"] = {{{"negative_slope", float_v(0.01)}, {"inplace", bool_v(false)}}, false,
                      [](Args& a) {
                        return make<td::nn::LeakyReLU>(a.f("negative_slope"), a.b("inplace"));
                      }};
    t["ELU"] = {{{"alpha", float_v(1.0)}, {"inplace", bool_v(false)}}, false,
                [](Args& a) { return make<td::nn::ELU>(a.f("alpha"), a.b("inplace")); }};
    t["CELU"] = {{{"alpha", float_v(1.0)}, {"inplace", bool_v(false)}}, false,
                 [](Args& a) { return make<td::nn::CELU>(a.f("alpha"), a.b("inplace")); }};
    t["Softplus"] = {{{"beta", int_v(1)}, {"threshold", int_v(20)}}, false, [](Args& a) {
                       return make<td::nn::Softplus>(a.f("beta"), a.f("threshold"));
                     }};
    // min_value and max_value: torch's deprecated spellings, refused unless None
    t["Hardtanh"] = {{{"min_val", float_v(-1.0)},
                      {"max_val", float_v(1.0)},
                      {"inplace", bool_v(false)},
                      {"min_value", none()},
                      {"max_value", none()}},
                     false,
                     [](Args& a) {
                       a.require_default("min_value", none());
                       a.require_default("max_value", none());
                       return make<td::nn::Hardtanh>(a.f("min_val"), a.f("max_val"),
                                                     a.b("inplace"));
                     }};
    t["Softsign"] = {{}, false, [](Args&) { return make<td::nn::Softsign>(); }};
    t["Tanhshrink"] = {{}, false, [](Args&) { return make<td::nn::Tanhshrink>(); }};
    t["LogSigmoid"] = {{}, false, [](Args&) { return make<td::nn::LogSigmoid>(); }};
    t["GLU"] = {{{"dim", int_v(-1)}}, false, [](Args& a) { return make<td::nn::GLU>(a.i("dim")); }};
    t["Unflatten"] = {{{"dim", std::nullopt}, {"unflattened_size", std::nullopt}}, false,
                      [](Args& a) {
                        return make<td::nn::Unflatten>(a.i("dim"),
                                                       td::Shape(a.ints("unflattened_size", 0)));
                      }};
    t["Dropout1d"] = {{{"p", float_v(0.5)}, {"inplace", bool_v(false)}}, false, [](Args& a) {
                        return make<td::nn::Dropout1d>(a.f("p"), a.b("inplace"));
                      }};
    t["Dropout2d"] = {{{"p", float_v(0.5)}, {"inplace", bool_v(false)}}, false, [](Args& a) {
                        return make<td::nn::Dropout2d>(a.f("p"), a.b("inplace"));
                      }};
    t["PReLU"] = {{{"num_parameters", int_v(1)}, {"init", float_v(0.25)}}, false, [](Args& a) {
                    return make<td::nn::PReLU>(a.i("num_parameters"), a.f("init"));
                  }};
    add_loss_kinds(t);
    return t;
  }();
  return table;
}

ModulePtr build(const SpecCall& call, const std::string& spec) {
  const auto& table = kinds();
  auto it = table.find(call.name);
  if (it == table.end()) {
    std::string known;
    for (const auto& [name, kind] : table) known += (known.empty() ? "" : ", ") + name;
    throw SpecError("bad model spec: unknown module '" + call.name + "' (known: " + known + ")",
                    spec, call.column);
  }
  Args args(call, it->second, spec);
  try {
    return it->second.make(args);
  } catch (const SpecError&) {
    throw;
  } catch (const std::exception& e) {  // the constructor rejected its arguments
    throw SpecError("bad model spec: " + std::string(e.what()), spec, call.column);
  }
}

}  // namespace

std::shared_ptr<td::nn::Module> build_model(const std::string& spec) {
  return build(parse_model_spec(spec), spec);
}

std::vector<std::string> spec_module_names() {
  std::vector<std::string> out;
  for (const auto& [name, kind] : kinds()) out.push_back(name);
  return out;
}

}  // namespace tdvmap
