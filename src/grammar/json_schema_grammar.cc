#include "grammar/json_schema_grammar.h"

#include <cmath>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "grammar/regex_gbnf.h"

namespace kvserve {
namespace {

using json = nlohmann::ordered_json;

// The rules every JSON grammar may use, added on first use.
const std::map<std::string, std::string>& PrimitiveRules() {
  static const std::map<std::string, std::string> kRules = {
      {"ws", R"(( " " | "\n" [ \t]{0,20} )?)"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object",
       R"("{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}")"},
      {"array", R"("[" ws ( value ws ( "," ws value ws )* )? "]")"},
      {"string", R"("\"" char* "\"")"},
      {"char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))"},
      {"number", R"("-"? unsigned-number)"},
      {"unsigned-number",
       R"(( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?)"},
      {"integer", R"("-"? ( "0" | [1-9] [0-9]{0,15} ))"},
      {"boolean", R"("true" | "false")"},
      {"null", R"("null")"},
      {"date",
       R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))"},
      {"time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"date-time", R"(date "T" time)"},
      {"uuid",
       R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})"},
  };
  return kRules;
}

// The primitive rules each one refers to.
const std::map<std::string, std::vector<std::string>>& PrimitiveUses() {
  static const std::map<std::string, std::vector<std::string>> kUses = {
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"ws", "string", "value"}},
      {"array", {"ws", "value"}},
      {"string", {"char"}},
      {"number", {"unsigned-number"}},
      {"date-time", {"date", "time"}},
  };
  return kUses;
}

// Validation keywords kvserve does not enforce: refused rather than ignored.
const std::set<std::string>& Unsupported() {
  static const std::set<std::string> kKeys = {"multipleOf",
                                              "not",
                                              "if",
                                              "then",
                                              "else",
                                              "patternProperties",
                                              "propertyNames",
                                              "dependentRequired",
                                              "dependentSchemas",
                                              "dependencies",
                                              "uniqueItems",
                                              "contains",
                                              "minContains",
                                              "maxContains",
                                              "minProperties",
                                              "maxProperties",
                                              "unevaluatedProperties",
                                              "unevaluatedItems"};
  return kKeys;
}

std::string Digits(uint64_t v) { return std::to_string(v); }

// GBNF for the decimal strings of [lo, hi], all of exactly the same length (leading zeros kept).
std::string SameLengthRange(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return GbnfLiteral(lo);
  const size_t rest = lo.size() - 1;
  const char a = lo[0], b = hi[0];
  auto digit_class = [](char from, char to) {
    return from == to ? GbnfLiteral(std::string(1, from))
                      : "[" + std::string(1, from) + "-" + std::string(1, to) + "]";
  };
  auto any_digits = [](size_t n) {
    return n == 0 ? std::string() : " [0-9]{" + std::to_string(n) + "}";
  };
  if (a == b)
    return GbnfLiteral(std::string(1, a)) + " (" + SameLengthRange(lo.substr(1), hi.substr(1)) +
           ")";
  std::vector<std::string> parts;
  parts.push_back(GbnfLiteral(std::string(1, a)) +
                  (rest ? " (" + SameLengthRange(lo.substr(1), std::string(rest, '9')) + ")" : ""));
  if (b - a > 1)
    parts.push_back(digit_class(static_cast<char>(a + 1), static_cast<char>(b - 1)) +
                    any_digits(rest));
  parts.push_back(GbnfLiteral(std::string(1, b)) +
                  (rest ? " (" + SameLengthRange(std::string(rest, '0'), hi.substr(1)) + ")" : ""));
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " | ") + p;
  return out;
}

constexpr int kMaxDigits = 16;  // as the generic integer rule: at most 16 digits

// GBNF for the non-negative integers in [lo, hi] (hi nullopt: up to 16 digits), no leading zeros.
std::string UnsignedRange(uint64_t lo, std::optional<uint64_t> hi) {
  std::vector<std::string> parts;
  const size_t lo_len = Digits(lo).size();
  const size_t hi_len = hi ? Digits(*hi).size() : kMaxDigits;
  for (size_t len = lo_len; len <= hi_len; ++len) {
    const uint64_t band_lo = len == 1 ? 0 : static_cast<uint64_t>(std::pow(10.0, len - 1));
    const uint64_t band_hi = static_cast<uint64_t>(std::pow(10.0, len)) - 1;
    const uint64_t from = std::max(lo, band_lo);
    const uint64_t to = hi ? std::min(*hi, band_hi) : band_hi;
    if (from > to) continue;
    if (!hi && len > lo_len && len == lo_len + 1) {
      // Every longer length at once: [1-9] [0-9]{len-1, 15}.
      parts.push_back("[1-9] [0-9]{" + std::to_string(len - 1) + "," +
                      std::to_string(kMaxDigits - 1) + "}");
      break;
    }
    parts.push_back("(" + SameLengthRange(Digits(from), Digits(to)) + ")");
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " | ") + p;
  return out;
}

class SchemaConverter {
 public:
  SchemaConverter(const json& root, const GrammarLimits& limits, std::string root_rule)
      : root_(&root), limits_(limits), root_rule_(std::move(root_rule)) {}

  // Several documents, each its own rule, sharing the helper rules (JsonSchemaRulesToGbnf).
  Result<std::string> ConvertMany(std::span<const JsonSchemaRule> documents) {
    for (const JsonSchemaRule& d : documents) used_.insert(d.rule);
    std::string out;
    for (const JsonSchemaRule& d : documents) {
      root_ = d.root;
      refs_.clear();  // a $ref is resolved against its own document's root
      auto body = Visit(*d.schema, d.rule + "-value", d.where, 0);
      if (!body.ok()) return body.status();
      out += d.rule + " ::= " + *body + "\n";
    }
    if (rules_.size() > limits_.max_rules) {
      return Error("schema",
                   "more than " + std::to_string(limits_.max_rules) + " rules (limit max_rules)");
    }
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

  Result<std::string> Convert() {
    auto root = Visit(*root_, "root-value", "schema", 0);
    if (!root.ok()) return root.status();
    if (rules_.size() > limits_.max_rules) {
      return Error("schema",
                   "more than " + std::to_string(limits_.max_rules) + " rules (limit max_rules)");
    }
    std::string out = root_rule_ + " ::= " + *root + " ws\n";
    Use("ws");
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  void Use(const std::string& primitive) {
    if (used_.count(primitive)) return;
    used_.insert(primitive);
    rules_.emplace_back(primitive, PrimitiveRules().at(primitive));
    auto it = PrimitiveUses().find(primitive);
    if (it != PrimitiveUses().end()) {
      for (const std::string& inner : it->second) Use(inner);
    }
  }

  std::string NewName(const std::string& hint) {
    std::string base;
    for (char c : hint) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (base.empty() || base.size() > 40) base = base.substr(0, 40) + "x";
    std::string name = base;
    for (int i = 2;
         used_.count(name) || PrimitiveRules().count(name) || name == "root" || name == root_rule_;
         ++i) {
      name = base + "-" + std::to_string(i);
    }
    used_.insert(name);
    return name;
  }

  std::string AddRule(const std::string& hint, const std::string& body) {
    const std::string name = NewName(hint);
    rules_.emplace_back(name, body);
    return name;
  }

  Status Error(const std::string& where, const std::string& what) const {
    return Status::InvalidArgument(where + ": " + what);
  }

  Result<std::string> Visit(const json& schema, const std::string& hint, const std::string& where,
                            int depth);
  Result<std::string> VisitRef(const std::string& ref, const std::string& where, int depth);
  Result<std::string> VisitType(const json& schema, const std::string& type,
                                const std::string& hint, const std::string& where, int depth);
  Result<std::string> VisitObject(const json& schema, const std::string& hint,
                                  const std::string& where, int depth);
  Result<std::string> VisitArray(const json& schema, const std::string& hint,
                                 const std::string& where, int depth);
  Result<std::string> VisitString(const json& schema, const std::string& where);
  // A count keyword (minItems, maxLength, ...): absent, or an integer in [0, max_repeat].
  Result<std::optional<int>> ReadCount(const json& schema, const char* key,
                                       const std::string& where) const;
  Result<std::string> VisitInteger(const json& schema, const std::string& where);
  Result<std::string> VisitNumber(const json& schema, const std::string& where);

  const json* root_;
  GrammarLimits limits_;
  std::string root_rule_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> used_;
  std::map<std::string, std::string> refs_;  // $ref -> its rule
};

Result<std::string> SchemaConverter::Visit(const json& schema, const std::string& hint,
                                           const std::string& where, int depth) {
  if (depth > limits_.max_nesting) {
    return Error(where, "nested deeper than " + std::to_string(limits_.max_nesting) +
                            " (limit max_nesting)");
  }
  if (rules_.size() > limits_.max_rules) {
    return Error(where,
                 "more than " + std::to_string(limits_.max_rules) + " rules (limit max_rules)");
  }
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) return Error(where, "the schema 'false' matches nothing");
    Use("value");
    return std::string("value");
  }
  if (!schema.is_object()) return Error(where, "a schema must be an object, got " + schema.dump());
  for (const auto& [key, value] : schema.items()) {
    if (Unsupported().count(key)) return Error(where, "'" + key + "' is not supported");
  }
  if (schema.contains("$ref")) {
    if (!schema["$ref"].is_string()) return Error(where + ".$ref", "must be a string");
    return VisitRef(schema["$ref"].get<std::string>(), where + ".$ref", depth);
  }
  if (schema.contains("const")) return GbnfLiteral(schema["const"].dump());
  if (schema.contains("enum")) {
    const json& values = schema["enum"];
    if (!values.is_array() || values.empty())
      return Error(where + ".enum", "must be a non-empty array");
    std::string body;
    for (const json& v : values) body += (body.empty() ? "" : " | ") + GbnfLiteral(v.dump());
    return AddRule(hint, body);
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    if (!schema.contains(key)) continue;
    const json& list = schema[key];
    if (!list.is_array() || list.empty())
      return Error(where + "." + key, "must be a non-empty array");
    if (std::string(key) == "allOf" && list.size() != 1) {
      return Error(where + ".allOf", "only an allOf of one schema is supported");
    }
    std::string body;
    for (size_t i = 0; i < list.size(); ++i) {
      auto alt = Visit(list[i], hint + "-" + std::to_string(i),
                       where + "." + key + "[" + std::to_string(i) + "]", depth + 1);
      if (!alt.ok()) return alt.status();
      body += (body.empty() ? "" : " | ") + *alt;
    }
    return AddRule(hint, body);
  }
  const json* type = schema.contains("type") ? &schema["type"] : nullptr;
  if (type && type->is_array()) {
    std::string body;
    for (const json& t : *type) {
      if (!t.is_string()) return Error(where + ".type", "must hold type names, got " + t.dump());
      auto alt = VisitType(schema, t.get<std::string>(), hint, where, depth);
      if (!alt.ok()) return alt.status();
      body += (body.empty() ? "" : " | ") + *alt;
    }
    if (body.empty()) return Error(where + ".type", "must not be empty");
    return AddRule(hint, body);
  }
  if (type && !type->is_string()) return Error(where + ".type", "must be a string or an array");
  std::string name = type ? type->get<std::string>() : "";
  if (name.empty() && (schema.contains("properties") || schema.contains("additionalProperties")))
    name = "object";
  if (name.empty() && (schema.contains("items") || schema.contains("prefixItems"))) name = "array";
  if (name.empty()) {
    Use("value");
    return std::string("value");
  }
  return VisitType(schema, name, hint, where, depth);
}

Result<std::string> SchemaConverter::VisitRef(const std::string& ref, const std::string& where,
                                              int depth) {
  auto it = refs_.find(ref);
  if (it != refs_.end()) return it->second;
  const json* target = root_;
  std::string hint = "ref";
  if (ref != "#") {
    std::string path;
    if (ref.rfind("#/$defs/", 0) == 0)
      path = ref.substr(8), target = root_->contains("$defs") ? &(*root_)["$defs"] : nullptr;
    else if (ref.rfind("#/definitions/", 0) == 0)
      path = ref.substr(14),
      target = root_->contains("definitions") ? &(*root_)["definitions"] : nullptr;
    else
      return Error(
          where, "only '#', '#/$defs/...' and '#/definitions/...' references are supported, got '" +
                     ref + "'");
    // JSON Pointer escapes in the name.
    std::string name;
    for (size_t i = 0; i < path.size(); ++i) {
      if (path[i] == '~' && i + 1 < path.size()) {
        name += path[i + 1] == '1' ? '/' : '~';
        ++i;
      } else {
        name += path[i];
      }
    }
    if (!target || !target->is_object() || !target->contains(name))
      return Error(where, "'" + ref + "' is not defined");
    target = &(*target)[name];
    hint = name;
  }
  // Named before it is visited, so that a recursive schema refers to itself.
  const std::string rule = NewName(hint);
  refs_[ref] = rule;
  const size_t slot = rules_.size();
  rules_.emplace_back(rule, "");
  auto body = Visit(*target, rule + "-value", where, depth + 1);
  if (!body.ok()) return body.status();
  rules_[slot].second = *body;
  return rule;
}

Result<std::string> SchemaConverter::VisitType(const json& schema, const std::string& type,
                                               const std::string& hint, const std::string& where,
                                               int depth) {
  if (type == "object") return VisitObject(schema, hint, where, depth);
  if (type == "array") return VisitArray(schema, hint, where, depth);
  if (type == "string") return VisitString(schema, where);
  if (type == "integer") return VisitInteger(schema, where);
  if (type == "number") return VisitNumber(schema, where);
  if (type == "boolean" || type == "null") {
    Use(type);
    return type;
  }
  return Error(where + ".type", "unknown type '" + type + "'");
}

Result<std::string> SchemaConverter::VisitObject(const json& schema, const std::string& hint,
                                                 const std::string& where, int depth) {
  Use("ws");
  const json empty = json::object();
  const json& properties = schema.contains("properties") ? schema["properties"] : empty;
  if (!properties.is_object()) return Error(where + ".properties", "must be an object");
  std::set<std::string> required;
  if (schema.contains("required")) {
    if (!schema["required"].is_array()) return Error(where + ".required", "must be an array");
    for (const json& r : schema["required"]) {
      if (!r.is_string()) return Error(where + ".required", "must hold strings, got " + r.dump());
      if (!properties.contains(r.get<std::string>())) {
        return Error(where + ".required", "'" + r.get<std::string>() + "' is not in properties");
      }
      required.insert(r.get<std::string>());
    }
  }
  // Extra members: "additionalProperties": true or a schema; false or absent: none (strict mode),
  // except that a schema with no properties at all takes any members.
  std::string extra;
  const json* additional =
      schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
  if ((additional && !(additional->is_boolean() && !additional->get<bool>())) ||
      (!additional && properties.empty())) {
    std::string value = "value";
    if (additional && additional->is_object()) {
      auto v = Visit(*additional, hint + "-additional", where + ".additionalProperties", depth + 1);
      if (!v.ok()) return v.status();
      value = *v;
    } else {
      Use("value");
    }
    Use("string");
    extra = "string ws \":\" ws " + value + " ws";
  }
  // Members in the schema's order: after[k] is what may follow once a member was written,
  // first[k] what may come when none was yet.
  std::vector<std::pair<std::string, std::string>> members;  // (name, "key" ws ":" ws value ws)
  for (const auto& [name, sub] : properties.items()) {
    auto v = Visit(sub, hint + "-" + name, where + ".properties." + name, depth + 1);
    if (!v.ok()) return v.status();
    members.emplace_back(name, GbnfLiteral(json(name).dump()) + " ws \":\" ws " + *v + " ws");
  }
  const std::string tail_after = extra.empty() ? "" : "( \",\" ws " + extra + " )*";
  const std::string tail_first =
      extra.empty() ? "" : "( " + extra + " ( \",\" ws " + extra + " )* )?";
  std::string after = tail_after, first = tail_first;
  for (size_t k = members.size(); k-- > 0;) {
    const bool optional = !required.count(members[k].first);
    const std::string after_rest = after.empty() ? "" : " " + after;
    const std::string with_after = "\",\" ws " + members[k].second + after_rest;
    const std::string with_first = members[k].second + after_rest;
    std::string next_after =
        optional ? "( " + with_after + " )" + (after.empty() ? "?" : " | " + after) : with_after;
    std::string next_first =
        optional ? with_first + (first.empty() ? " | \"\"" : " | " + first) : with_first;
    after = AddRule(hint + "-after-" + members[k].first, next_after);
    first = AddRule(hint + "-from-" + members[k].first, next_first);
  }
  return AddRule(hint, "\"{\" ws " + (first.empty() ? "" : first + " ") + "\"}\"");
}

Result<std::string> SchemaConverter::VisitArray(const json& schema, const std::string& hint,
                                                const std::string& where, int depth) {
  Use("ws");
  std::string item = "value";
  if (schema.contains("items") && !(schema["items"].is_boolean() && schema["items"].get<bool>())) {
    auto v = Visit(schema["items"], hint + "-item", where + ".items", depth + 1);
    if (!v.ok()) return v.status();
    item = *v;
  } else {
    Use("value");
  }
  auto min = ReadCount(schema, "minItems", where);
  if (!min.ok()) return min.status();
  auto max = ReadCount(schema, "maxItems", where);
  if (!max.ok()) return max.status();
  std::vector<std::string> prefix;
  if (schema.contains("prefixItems")) {
    if (!schema["prefixItems"].is_array()) return Error(where + ".prefixItems", "must be an array");
    for (size_t i = 0; i < schema["prefixItems"].size(); ++i) {
      auto v = Visit(schema["prefixItems"][i], hint + "-" + std::to_string(i),
                     where + ".prefixItems[" + std::to_string(i) + "]", depth + 1);
      if (!v.ok()) return v.status();
      prefix.push_back(*v + " ws");
    }
    if (!schema.contains("items")) max = std::optional<int>(static_cast<int>(prefix.size()));
  }
  const int lo = min->value_or(0);
  const std::optional<int> hi = *max;
  if (hi && *hi < lo) return Error(where, "maxItems is less than minItems");
  // Items as a list: the prefix ones in order, then `item`, with commas between.
  std::string body = "\"[\" ws ";
  std::string list;
  const int n_prefix = static_cast<int>(prefix.size());
  for (int i = 0; i < n_prefix && (!hi || i < *hi); ++i)
    list += (i ? " \",\" ws " : "") + prefix[i];
  const int rest_lo = std::max(0, lo - n_prefix);
  std::optional<int> rest_hi;
  if (hi) rest_hi = std::max(0, *hi - n_prefix);
  if (!rest_hi || *rest_hi > 0) {
    const std::string one = item + " ws";
    std::string more;
    if (n_prefix == 0) {
      // item ( "," ws item ){lo-1, hi-1}, all optional when lo is 0.
      const std::string rep = "( \",\" ws " + one + " ){" +
                              std::to_string(std::max(0, rest_lo - 1)) + "," +
                              (rest_hi ? std::to_string(*rest_hi - 1) : "") + "}";
      more = one + " " + rep;
      list = rest_lo == 0 ? "( " + more + " )?" : more;
    } else {
      const std::string rep = "( \",\" ws " + one + " ){" + std::to_string(rest_lo) + "," +
                              (rest_hi ? std::to_string(*rest_hi) : "") + "}";
      list += " " + rep;
    }
  }
  body += list + " \"]\"";
  return AddRule(hint, body);
}

Result<std::optional<int>> SchemaConverter::ReadCount(const json& schema, const char* key,
                                                      const std::string& where) const {
  if (!schema.contains(key)) return std::optional<int>();
  const json& v = schema[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    return Error(where + "." + key, "must be a non-negative integer");
  }
  if (v.get<int64_t>() > limits_.max_repeat) {
    return Error(where + "." + key, std::to_string(v.get<int64_t>()) + " exceeds the limit of " +
                                        std::to_string(limits_.max_repeat) + " (limit max_repeat)");
  }
  return std::optional<int>(static_cast<int>(v.get<int64_t>()));
}

Result<std::string> SchemaConverter::VisitString(const json& schema, const std::string& where) {
  Use("string");
  if (schema.contains("format") && schema["format"].is_string()) {
    const std::string format = schema["format"].get<std::string>();
    if (format == "date" || format == "time" || format == "date-time" || format == "uuid") {
      Use(format);
      return "\"\\\"\" " + format + " \"\\\"\"";
    }
  }
  if (schema.contains("pattern")) {
    if (!schema["pattern"].is_string()) return Error(where + ".pattern", "must be a string");
    auto body = RegexToGbnf(schema["pattern"].get<std::string>(), limits_);
    if (!body.ok()) return Error(where + ".pattern", body.message());
    return AddRule("pattern", "\"\\\"\" " + *body + " \"\\\"\"");
  }
  const bool has_min = schema.contains("minLength"), has_max = schema.contains("maxLength");
  if (!has_min && !has_max) return std::string("string");
  auto lo = ReadCount(schema, "minLength", where);
  if (!lo.ok()) return lo.status();
  auto hi = ReadCount(schema, "maxLength", where);
  if (!hi.ok()) return hi.status();
  const int min = lo->value_or(0);
  const std::optional<int> max = *hi;
  if (max && *max < min) return Error(where, "maxLength is less than minLength");
  return "\"\\\"\" char{" + std::to_string(min) + "," + (max ? std::to_string(*max) : "") +
         "} \"\\\"\"";
}

Result<std::string> SchemaConverter::VisitInteger(const json& schema, const std::string& where) {
  std::optional<int64_t> lo, hi;
  auto bound = [&](const char* key, int64_t shift, std::optional<int64_t>& out,
                   bool is_min) -> Status {
    if (!schema.contains(key)) return Status::Ok();
    const json& v = schema[key];
    if (!v.is_number()) return Error(where + "." + key, "must be a number, got " + v.dump());
    const double d = v.get<double>();
    if (std::fabs(d) > 1e15) return Error(where + "." + key, "beyond 16 digits");
    int64_t b = static_cast<int64_t>(is_min ? std::ceil(d) : std::floor(d));
    if (shift != 0 && static_cast<double>(b) == d) b += shift;
    out = out ? (is_min ? std::max(*out, b) : std::min(*out, b)) : b;
    return Status::Ok();
  };
  KVSERVE_RETURN_IF_ERROR(bound("minimum", 0, lo, true));
  KVSERVE_RETURN_IF_ERROR(bound("exclusiveMinimum", 1, lo, true));
  KVSERVE_RETURN_IF_ERROR(bound("maximum", 0, hi, false));
  KVSERVE_RETURN_IF_ERROR(bound("exclusiveMaximum", -1, hi, false));
  if (!lo && !hi) {
    Use("integer");
    return std::string("integer");
  }
  if (lo && hi && *lo > *hi) return Error(where, "no integer lies between the bounds");
  std::vector<std::string> parts;
  // Negative values: "-" followed by magnitudes in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t mag_lo = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
    std::optional<uint64_t> mag_hi;
    if (lo) mag_hi = static_cast<uint64_t>(-*lo);
    parts.push_back("\"-\" (" + UnsignedRange(mag_lo, mag_hi) + ")");
  }
  if (!hi || *hi >= 0) {
    std::optional<uint64_t> top;
    if (hi) top = static_cast<uint64_t>(*hi);
    parts.push_back("(" + UnsignedRange(lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0, top) + ")");
  }
  std::string body;
  for (const std::string& p : parts) body += (body.empty() ? "" : " | ") + p;
  return AddRule("integer-range", body);
}

Result<std::string> SchemaConverter::VisitNumber(const json& schema, const std::string& where) {
  Use("number");
  if (schema.contains("exclusiveMinimum") || schema.contains("exclusiveMaximum") ||
      schema.contains("maximum")) {
    return Error(where,
                 "bounds on a number other than 'minimum' >= 0 are not supported (use an integer, "
                 "or a pattern)");
  }
  if (!schema.contains("minimum")) return std::string("number");
  const json& m = schema["minimum"];
  if (!m.is_number() || m.get<double>() != 0.0) {
    return Error(where + ".minimum", "only 'minimum': 0 is supported on a number, got " + m.dump());
  }
  return std::string("unsigned-number");
}

}  // namespace

Result<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                     const GrammarLimits& limits, const std::string& root_rule) {
  if (schema.dump().size() > limits.max_source_bytes) {
    return Status::InvalidArgument("schema: larger than " +
                                   std::to_string(limits.max_source_bytes) +
                                   " bytes (limit max_source_bytes)");
  }
  return SchemaConverter(schema, limits, root_rule).Convert();
}

Result<std::string> JsonSchemaRulesToGbnf(std::span<const JsonSchemaRule> documents,
                                          const GrammarLimits& limits) {
  size_t bytes = 0;
  for (const JsonSchemaRule& d : documents) bytes += d.schema->dump().size();
  if (bytes > limits.max_source_bytes) {
    return Status::InvalidArgument("schema: larger than " +
                                   std::to_string(limits.max_source_bytes) +
                                   " bytes (limit max_source_bytes)");
  }
  if (documents.empty()) return std::string();
  return SchemaConverter(*documents.front().root, limits, "root").ConvertMany(documents);
}

std::string JsonObjectGbnf() {
  std::string out = "root ::= object ws\n";
  for (const char* name : {"ws", "value", "object", "array", "string", "char", "number",
                           "unsigned-number", "boolean", "null"}) {
    out += std::string(name) + " ::= " + PrimitiveRules().at(name) + "\n";
  }
  return out;
}

}  // namespace kvserve
