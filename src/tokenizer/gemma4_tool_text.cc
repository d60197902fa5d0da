#include "tokenizer/gemma4_tool_text.h"

#include <algorithm>
#include <string>

namespace kvserve {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kQuote = "<|\"|>";
// The keys format_parameters does not list as properties.
constexpr std::string_view kSchemaKeys[] = {"description", "type", "properties", "required",
                                            "nullable"};

const Json* Get(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// Jinja's truth of a value: absent, null, false, 0, "" and empty containers are false.
bool Truthy(const Json* value) {
  if (value == nullptr || value->is_null()) return false;
  if (value->is_boolean()) return value->get<bool>();
  if (value->is_number()) return value->get<double>() != 0;
  return !value->empty();
}

std::string PyRepr(const Json& value);

// What Jinja prints for a value ({{ value }}, `| upper`): strings as they are, Python's spelling of
// the rest.
std::string PyStr(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_null()) return "None";
  if (value.is_number()) return value.dump();  // as Python's repr (shortest round trip)
  return PyRepr(value);
}

// Python's repr, for the lists and dicts a schema may hold where the template prints a string.
std::string PyRepr(const Json& value) {
  if (value.is_string()) return "'" + value.get<std::string>() + "'";
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + PyRepr(value[i]);
    return out + "]";
  }
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      out += (first ? "'" : ", '") + key + "': " + PyRepr(item);
      first = false;
    }
    return out + "}";
  }
  return PyStr(value);
}

std::string Upper(std::string text) {
  for (char& c : text) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return text;
}

// `value['type'] | upper`: "" when there is none.
std::string UpperType(const Json& schema) {
  const Json* type = Get(schema, "type");
  return type == nullptr ? "" : Upper(PyStr(*type));
}

void AppendQuoted(std::string_view text, ChatText& out) {
  out += kQuote;
  out.AppendMessage(text);
  out += kQuote;
}

// The template's `if add_comma %},{% else %}{% set add_comma = true %}{% endif`.
void Comma(bool& add_comma, ChatText& out) {
  if (add_comma) out += ",";
  add_comma = true;
}

// [<|"|>a<|"|>,<|"|>b<|"|>] of a "required" list.
void AppendRequired(const Json& required, ChatText& out) {
  out += "required:[";
  if (required.is_array()) {
    for (size_t i = 0; i < required.size(); ++i) {
      if (i > 0) out += ",";
      AppendQuoted(PyStr(required[i]), out);
    }
  }
  out += "]";
}

void AppendParameters(const Json& properties, int depth, ChatText& out);

// An array property's "items:{...}".
void AppendItems(const Json& items, int depth, ChatText& out) {
  out += "items:{";
  bool first = true;
  for (auto member : Gemma4SortedMembers(items)) {
    const std::string& key = member.key();
    const Json& value = member.value();
    if (value.is_null()) continue;
    if (!first) out += ",";
    first = false;
    if (key == "properties") {
      out += "properties:{";
      if (value.is_object()) AppendParameters(value, depth + 1, out);
      out += "}";
    } else if (key == "required") {
      AppendRequired(value, out);
    } else if (key == "type") {
      out += "type:";
      Json upper = value.is_string() ? Json(Upper(value.get<std::string>())) : Json::array();
      if (value.is_array()) {
        for (const Json& type : value) upper.push_back(Upper(PyStr(type)));
      }
      AppendGemma4Value(upper, /*quote_keys=*/true, out);
    } else {
      out.AppendMessage(key);
      out += ":";
      AppendGemma4Value(value, /*quote_keys=*/true, out);
    }
  }
  out += "}";
}

// One property of format_parameters: KEY:{description,enum|items,nullable,properties,required,
// type}.
void AppendProperty(const std::string& key, const Json& value, int depth, ChatText& out) {
  out.AppendMessage(key);
  out += ":{";
  bool add_comma = false;
  if (const Json* description = Get(value, "description"); Truthy(description)) {
    out += "description:";
    AppendQuoted(PyStr(*description), out);
    add_comma = true;
  }
  const std::string type = UpperType(value);
  if (type == "STRING") {
    if (const Json* values = Get(value, "enum"); Truthy(values)) {
      Comma(add_comma, out);
      out += "enum:";
      AppendGemma4Value(*values, /*quote_keys=*/true, out);
    }
  } else if (type == "ARRAY") {
    if (const Json* items = Get(value, "items");
        items != nullptr && items->is_object() && !items->empty()) {
      Comma(add_comma, out);
      AppendItems(*items, depth, out);
    }
  }
  if (Truthy(Get(value, "nullable"))) {
    Comma(add_comma, out);
    out += "nullable:true";
  }
  if (type == "OBJECT") {
    // Without a "properties" mapping the template lists the property's own keys instead.
    const Json* properties = Get(value, "properties");
    Comma(add_comma, out);
    out += "properties:{";
    AppendParameters(properties != nullptr && properties->is_object() ? *properties : value,
                     depth + 1, out);
    out += "}";
    if (const Json* required = Get(value, "required"); Truthy(required)) {
      Comma(add_comma, out);
      AppendRequired(*required, out);
    }
  }
  Comma(add_comma, out);
  out += "type:";
  AppendQuoted(type, out);
  out += "}";
}

// format_parameters: the properties that are not schema keywords, comma-separated.
void AppendParameters(const Json& properties, int depth, ChatText& out) {
  if (depth > kMaxGemma4SchemaDepth || !properties.is_object()) return;
  bool first = true;
  for (auto member : Gemma4SortedMembers(properties)) {
    const std::string& key = member.key();
    if (std::find(std::begin(kSchemaKeys), std::end(kSchemaKeys), key) != std::end(kSchemaKeys)) {
      continue;
    }
    if (!first) out += ",";
    first = false;
    AppendProperty(key, member.value(), depth, out);
  }
}

void AppendValue(const Json& value, bool quote_keys, int depth, ChatText& out) {
  if (depth > kMaxGemma4SchemaDepth) return;
  if (value.is_string()) {
    AppendQuoted(value.get_ref<const std::string&>(), out);
  } else if (value.is_boolean()) {
    out += value.get<bool>() ? "true" : "false";
  } else if (value.is_object()) {
    out += "{";
    bool first = true;
    for (auto member : Gemma4SortedMembers(value)) {
      if (!first) out += ",";
      first = false;
      if (quote_keys) {
        AppendQuoted(member.key(), out);
      } else {
        out.AppendMessage(member.key());
      }
      out += ":";
      AppendValue(member.value(), quote_keys, depth + 1, out);
    }
    out += "}";
  } else if (value.is_array()) {
    out += "[";
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += ",";
      AppendValue(value[i], quote_keys, depth + 1, out);
    }
    out += "]";
  } else {
    out.AppendMessage(PyStr(value));  // numbers, and None
  }
}

}  // namespace

std::vector<Json::const_iterator> Gemma4SortedMembers(const Json& object) {
  std::vector<Json::const_iterator> members;
  if (!object.is_object()) return members;
  for (auto it = object.begin(); it != object.end(); ++it) members.push_back(it);
  auto folded = [](const std::string& key) {
    std::string lower = key;
    for (char& c : lower) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return lower;
  };
  std::stable_sort(members.begin(), members.end(),
                   [&](const auto& a, const auto& b) { return folded(a.key()) < folded(b.key()); });
  return members;
}

void AppendGemma4Value(const Json& value, bool quote_keys, ChatText& out) {
  AppendValue(value, quote_keys, 0, out);
}

void AppendGemma4Declaration(std::string_view tool_json, ChatText& out) {
  const Json tool = Json::parse(tool_json, nullptr, /*allow_exceptions=*/false);
  const Json* function = Get(tool, "function");
  if (function == nullptr || !function->is_object()) return;
  const Json* name = Get(*function, "name");
  const Json* description = Get(*function, "description");
  out += "declaration:";
  out.AppendMessage(name ? PyStr(*name) : "");
  out += "{description:";
  AppendQuoted(description ? PyStr(*description) : "", out);
  if (const Json* params = Get(*function, "parameters"); Truthy(params)) {
    out += ",parameters:{";
    if (const Json* properties = Get(*params, "properties"); Truthy(properties)) {
      out += "properties:{";
      AppendParameters(*properties, 0, out);
      out += "},";
    }
    if (const Json* required = Get(*params, "required"); Truthy(required)) {
      AppendRequired(*required, out);
      out += ",";
    }
    if (const Json* type = Get(*params, "type"); Truthy(type)) {
      out += "type:";
      AppendQuoted(Upper(PyStr(*type)), out);
      out += "}";  // only here: without a type the template leaves the brace open
    }
  }
  if (const Json* response = Get(*function, "response")) {
    out += ",response:{";
    if (const Json* description = Get(*response, "description"); Truthy(description)) {
      out += "description:";
      AppendQuoted(PyStr(*description), out);
      out += ",";
    }
    if (UpperType(*response) == "OBJECT") out += "type:<|\"|>OBJECT<|\"|>}";
  }
  out += "}";
}

}  // namespace kvserve
