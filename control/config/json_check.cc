#include "control/config/json_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dpu::ctl {
namespace {

using Json = nlohmann::ordered_json;
using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The closest of `names` to `word` when it is close enough to be a likely typo, else "".
std::string closest(std::string_view word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& n : names) {
    size_t d = editDistance(word, n);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  if (!best.empty() || word.size() < 4) return best;
  // A shortened or lengthened name: "capacity" for capacity_per_worker.
  for (const std::string& n : names) {
    if (n.size() > word.size() ? n.compare(0, word.size(), word) == 0
                               : word.compare(0, n.size(), n) == 0 && n.size() >= 4) {
      return n;
    }
  }
  return best;
}

std::string quoted(const Json& v) {
  if (v.is_object()) return v.empty() ? "{}" : "{...}";  // not dumped: may nest deeply
  if (v.is_array()) return v.empty() ? "[]" : "[...]";
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 60) + "...";
  return s;
}

class Checker {
 public:
  Checker(rules::ConfigErrorList* errors, const std::string& source)
      : errors_(errors), source_(source) {}

  // Checks the object `j` of message `d` at `path`; bad members are erased from `j`.
  void message(Json& j, const Descriptor* d, const std::string& path) {
    if (isWellKnown(d)) return;  // protobuf's own mapping (Any, FieldMask ...): it judges
    if (!j.is_object()) {
      add(path, absl::StrCat("expected an object (", d->name(), "), got ", j.type_name(), " ",
                             quoted(j)));
      j = Json::object();
      return;
    }
    std::vector<std::string> bad;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& key = it.key();
      const FieldDescriptor* fd = d->FindFieldByName(key);
      if (fd == nullptr) fd = findByJsonName(d, key);
      const std::string at = path.empty() ? key : absl::StrCat(path, ".", key);
      if (fd == nullptr) {
        std::vector<std::string> names;
        for (int i = 0; i < d->field_count(); ++i) {
          names.push_back(d->field(i)->name());
          names.push_back(d->field(i)->json_name());
        }
        std::string hint = closest(key, names);
        const FieldDescriptor* h = hint.empty() ? nullptr : d->FindFieldByName(hint);
        if (!hint.empty() && h == nullptr) h = findByJsonName(d, hint);
        add(at, absl::StrCat("unknown field \"", key, "\" in ", d->name(),
                             h ? absl::StrCat(" (did you mean ", h->name(), "?)") : ""));
        bad.push_back(key);
        continue;
      }
      const std::string fpath = path.empty() ? fd->name() : absl::StrCat(path, ".", fd->name());
      if (!field(it.value(), fd, fpath)) bad.push_back(key);
    }
    for (const std::string& k : bad) j.erase(k);
  }

 private:
  static bool isWellKnown(const Descriptor* d) {
    return d->file()->package() == "google.protobuf";
  }
  static const FieldDescriptor* findByJsonName(const Descriptor* d, const std::string& key) {
    for (int i = 0; i < d->field_count(); ++i) {
      if (d->field(i)->json_name() == key) return d->field(i);
    }
    return nullptr;
  }

  // false: the value is bad and must go (the error is recorded).
  bool field(Json& v, const FieldDescriptor* fd, const std::string& path) {
    if (v.is_null()) return true;  // null = the default
    if (fd->is_map()) {
      if (!v.is_object()) {
        add(path, absl::StrCat("expected an object (a map), got ", v.type_name(), " ", quoted(v)));
        return false;
      }
      const FieldDescriptor* val = fd->message_type()->map_value();
      std::vector<std::string> bad;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!single(it.value(), val, absl::StrCat(path, "[\"", it.key(), "\"]"))) bad.push_back(it.key());
      }
      for (const std::string& k : bad) v.erase(k);
      return true;
    }
    if (fd->is_repeated()) {
      if (!v.is_array()) {
        add(path, absl::StrCat("expected a list, got ", v.type_name(), " ", quoted(v)));
        return false;
      }
      for (size_t i = 0; i < v.size(); ++i) {
        Json& e = v[i];
        const std::string at = absl::StrCat(path, "[", i, "]");
        Scope scope(this, e, int(i));
        if (e.is_null()) {
          add(at, "null is not a value of a list");
          e = emptyOf(fd);
        } else if (!single(e, fd, at)) {
          e = emptyOf(fd);  // keeps the indices of the elements after it
        }
      }
      return true;
    }
    return single(v, fd, path);
  }

  // A value of the field's type (one element of a repeated field).
  bool single(Json& v, const FieldDescriptor* fd, const std::string& path) {
    switch (fd->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        message(v, fd->message_type(), path);
        return true;
      case FieldDescriptor::CPPTYPE_ENUM:
        return enumValue(v, fd->enum_type(), path);
      case FieldDescriptor::CPPTYPE_STRING:
        if (v.is_string()) return true;
        add(path, absl::StrCat("expected a string, got ", v.type_name(), " ", quoted(v)));
        return false;
      case FieldDescriptor::CPPTYPE_BOOL:
        if (v.is_boolean()) return true;
        add(path, absl::StrCat("expected true or false, got ", v.type_name(), " ", quoted(v)));
        return false;
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT: {
        double d = 0;
        if (v.is_number()) return true;
        if (v.is_string()) {
          const std::string s = v.get<std::string>();
          if (s == "NaN" || s == "Infinity" || s == "-Infinity" || absl::SimpleAtod(s, &d)) return true;
        }
        add(path, absl::StrCat("expected a number, got ", v.type_name(), " ", quoted(v)));
        return false;
      }
      case FieldDescriptor::CPPTYPE_INT32:
        return integer(v, path, "int32", std::numeric_limits<int32_t>::min(),
                       std::numeric_limits<int32_t>::max());
      case FieldDescriptor::CPPTYPE_INT64:
        return integer(v, path, "int64", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max());
      case FieldDescriptor::CPPTYPE_UINT32:
        return integer(v, path, "uint32", 0, std::numeric_limits<uint32_t>::max());
      case FieldDescriptor::CPPTYPE_UINT64:
        return integer(v, path, "uint64", 0, std::numeric_limits<uint64_t>::max());
    }
    return true;
  }

  // An integer in [lo, hi] as a JSON number (integral) or a quoted decimal, as protobuf's
  // JSON mapping accepts.
  bool integer(const Json& v, const std::string& path, const char* type, long double lo,
               long double hi) {
    long double x = 0;
    bool ok = false;
    if (v.is_number_unsigned()) {
      x = static_cast<long double>(v.get<uint64_t>());
      ok = true;
    } else if (v.is_number_integer()) {
      x = static_cast<long double>(v.get<int64_t>());
      ok = true;
    } else if (v.is_number_float()) {
      double d = v.get<double>();
      ok = std::isfinite(d) && std::floor(d) == d;
      x = d;
    } else if (v.is_string()) {
      const std::string s = v.get<std::string>();
      int64_t i = 0;
      uint64_t u = 0;
      if (absl::SimpleAtoi(s, &u)) {
        x = static_cast<long double>(u);
        ok = true;
      } else if (absl::SimpleAtoi(s, &i)) {
        x = static_cast<long double>(i);
        ok = true;
      }
    }
    if (!ok) {
      add(path, absl::StrCat("expected an integer (", type, "), got ", v.type_name(), " ", quoted(v)));
      return false;
    }
    if (x < lo || x > hi) {
      add(path, absl::StrCat(quoted(v), " is out of range for ", type, " [",
                             absl::StrCat(static_cast<int64_t>(lo)), ", ",
                             std::string(type).front() == 'u'
                                 ? absl::StrCat(static_cast<uint64_t>(hi))
                                 : absl::StrCat(static_cast<int64_t>(hi)),
                             "]"));
      return false;
    }
    return true;
  }

  bool enumValue(const Json& v, const EnumDescriptor* e, const std::string& path) {
    if (v.is_string() && e->FindValueByName(v.get<std::string>()) != nullptr) return true;
    if (v.is_number_integer() && v.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
        v.get<int64_t>() <= std::numeric_limits<int32_t>::max()) {
      return true;  // proto3 enums are open: a number is kept as it is
    }
    std::vector<std::string> names;
    std::string list;
    for (int i = 0; i < e->value_count(); ++i) {
      names.push_back(e->value(i)->name());
      absl::StrAppend(&list, i ? ", " : "", e->value(i)->name());
    }
    std::string hint;
    if (v.is_string()) {
      std::string upper = v.get<std::string>();
      for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
      hint = closest(upper, names);
      // "deny" for DENY, "nxdomain" for DNS_NXDOMAIN: the value without its enum's prefix.
      for (const std::string& n : names) {
        if (n == upper || (n.size() > upper.size() && n.compare(n.size() - upper.size(), upper.size(), upper) == 0 &&
                           n[n.size() - upper.size() - 1] == '_')) {
          hint = n;
        }
      }
    }
    add(path, absl::StrCat(quoted(v), " is not one of ", list,
                           hint.empty() ? "" : absl::StrCat(" (did you mean ", hint, "?)")));
    return false;
  }

  static Json emptyOf(const FieldDescriptor* fd) {
    switch (fd->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE: return Json::object();
      case FieldDescriptor::CPPTYPE_STRING: return "";
      case FieldDescriptor::CPPTYPE_BOOL: return false;
      default: return 0;
    }
  }

  // The element of a repeated field being checked: its errors carry its index and its id
  // (an "id" or "name" member).
  struct Scope {
    Scope(Checker* c, const Json& e, int index) : c_(c), rule_(c->rule_), index_(c->index_) {
      c->index_ = index;
      c->rule_.clear();
      if (e.is_object()) {
        for (const char* k : {"id", "name"}) {
          auto it = e.find(k);
          if (it != e.end() && it->is_string()) {
            c->rule_ = it->get<std::string>();
            break;
          }
        }
      }
    }
    ~Scope() {
      c_->rule_ = rule_;
      c_->index_ = index_;
    }
    Checker* c_;
    std::string rule_;
    int index_;
  };

  void add(const std::string& path, std::string reason) {
    rules::ConfigError e;
    e.section = path.substr(0, path.find_first_of(".["));
    e.rule = rule_;
    e.index = rule_.empty() ? -1 : index_;  // (the path has the index; formatError would repeat it)
    e.file = source_;
    e.field = path;
    e.reason = std::move(reason);
    errors_->push_back(std::move(e));
  }

  rules::ConfigErrorList* errors_;
  const std::string& source_;
  std::string rule_;
  int index_ = -1;
};

// The deepest nesting of objects / arrays in `text` (strings skipped), and the line where
// it first exceeds `limit`.
int nestingOver(const std::string& text, int limit) {
  int depth = 0, line = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > limit) return line;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return 0;
}

}  // namespace

JsonCheck checkJsonDocument(const std::string& text, const Descriptor* type,
                            const std::string& source) {
  JsonCheck out;
  // Protobuf refuses documents nested deeper than 100 levels; so does this pass, before
  // building (and recursively tearing down) a tree of them.
  constexpr int kMaxDepth = 100;
  if (int line = nestingOver(text, kMaxDepth)) {
    out.syntax_error = true;
    out.errors.push_back({"", "", -1, line, source, "",
                          absl::StrCat("nested deeper than ", kMaxDepth, " objects / lists")});
    return out;
  }
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    out.syntax_error = true;
    rules::ConfigError err;
    err.file = source;
    const size_t byte = std::min<size_t>(e.byte, text.size());
    const size_t at = byte ? byte - 1 : 0;  // nlohmann counts from 1, past the bad character
    err.line = 1 + int(std::count(text.begin(), text.begin() + long(at), '\n'));
    const size_t bol = text.rfind('\n', at ? at - 1 : 0);
    const size_t column = bol == std::string::npos || at == 0 ? at + 1 : at - bol;
    std::string what = e.what();
    if (size_t p = what.find("syntax error"); p != std::string::npos) what = what.substr(p);
    err.reason = absl::StrCat("not JSON: column ", column, ": ", what);
    out.errors.push_back(std::move(err));
    return out;
  } catch (const Json::exception& e) {
    // Not a syntax error but a value nlohmann cannot hold (e.g. out_of_range 406, a number
    // such as 531e309 that overflows a double): the document is refused, never thrown out of
    // this pass (found by the config fuzz target).
    out.syntax_error = true;
    rules::ConfigError err;
    err.file = source;
    std::string what = e.what();
    if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    err.reason = absl::StrCat("not JSON: ", what);
    out.errors.push_back(std::move(err));
    return out;
  }
  try {
    Checker(&out.errors, source).message(doc, type, "");
    out.cleaned = doc.dump();
  } catch (const Json::exception& e) {
    // The checker reads only values it has type-checked; should one still throw, the
    // document is refused with the reason rather than the exception escaping.
    out.syntax_error = true;
    rules::ConfigError err;
    err.file = source;
    err.reason = absl::StrCat("cannot check the JSON document: ", e.what());
    out.errors.push_back(std::move(err));
  }
  return out;
}

bool clearFieldPath(google::protobuf::Message* msg, std::string_view path) {
  using google::protobuf::Message;
  using google::protobuf::Reflection;
  Message* m = msg;
  while (!path.empty()) {
    const size_t end = path.find('.');
    std::string_view seg = path.substr(0, end);
    path = end == std::string_view::npos ? std::string_view() : path.substr(end + 1);
    int index = -1;
    if (size_t b = seg.find('['); b != std::string_view::npos) {
      if (seg.back() != ']' || !absl::SimpleAtoi(std::string(seg.substr(b + 1, seg.size() - b - 2)), &index)) {
        return false;
      }
      seg = seg.substr(0, b);
    }
    const FieldDescriptor* fd = m->GetDescriptor()->FindFieldByName(std::string(seg));
    if (fd == nullptr || (index >= 0) != fd->is_repeated() || fd->is_map()) return false;
    const Reflection* r = m->GetReflection();
    if (index >= 0 && index >= r->FieldSize(*m, fd)) return false;
    if (path.empty()) {
      if (index < 0) {
        r->ClearField(m, fd);
        return true;
      }
      switch (fd->cpp_type()) {
        case FieldDescriptor::CPPTYPE_MESSAGE: r->MutableRepeatedMessage(m, fd, index)->Clear(); break;
        case FieldDescriptor::CPPTYPE_STRING: r->SetRepeatedString(m, fd, index, ""); break;
        case FieldDescriptor::CPPTYPE_ENUM: r->SetRepeatedEnumValue(m, fd, index, 0); break;
        case FieldDescriptor::CPPTYPE_BOOL: r->SetRepeatedBool(m, fd, index, false); break;
        case FieldDescriptor::CPPTYPE_INT32: r->SetRepeatedInt32(m, fd, index, 0); break;
        case FieldDescriptor::CPPTYPE_INT64: r->SetRepeatedInt64(m, fd, index, 0); break;
        case FieldDescriptor::CPPTYPE_UINT32: r->SetRepeatedUInt32(m, fd, index, 0); break;
        case FieldDescriptor::CPPTYPE_UINT64: r->SetRepeatedUInt64(m, fd, index, 0); break;
        case FieldDescriptor::CPPTYPE_DOUBLE: r->SetRepeatedDouble(m, fd, index, 0); break;
        case FieldDescriptor::CPPTYPE_FLOAT: r->SetRepeatedFloat(m, fd, index, 0); break;
      }
      return true;
    }
    if (fd->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return false;
    m = index >= 0 ? r->MutableRepeatedMessage(m, fd, index) : r->MutableMessage(m, fd);
  }
  return false;
}

bool shadowedByParseError(const rules::ConfigErrorList& parse_errors, std::string_view field) {
  for (const rules::ConfigError& p : parse_errors) {
    if (p.field.empty() || field.size() < p.field.size()) continue;
    if (field.compare(0, p.field.size(), p.field) != 0) continue;
    if (field.size() == p.field.size() || field[p.field.size()] == '.' || field[p.field.size()] == '[') {
      return true;
    }
  }
  return false;
}

}  // namespace dpu::ctl
