// docs/openapi.json against the routes the server implements (http::Api::route_templates()) and
// against what the running server serves at GET /openapi.json.
#include <gtest/gtest.h>

#include <functional>
#include <regex>
#include <set>

#include "http/api.h"
#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

const std::string kDocPath = std::string(TOLLGATE_SOURCE_DIR) + "/docs/openapi.json";

json::value load_document() {
  const std::string text = read_file(kDocPath);
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  EXPECT_FALSE(ec) << kDocPath << " is not JSON: " << ec.message();
  return doc;
}

const std::set<std::string> kMethods{"get", "put", "post", "delete", "options", "head", "patch", "trace"};

// "GET /v1/holds/{hold_id}" for every operation of the document.
std::set<std::string> documented_operations(const json::value& doc) {
  std::set<std::string> out;
  if (!doc.is_object() || !doc.as_object().contains("paths")) return out;
  for (const auto& [path, item] : doc.at("paths").as_object()) {
    for (const auto& [method, operation] : item.as_object()) {
      if (!kMethods.count(std::string(method))) continue;
      std::string upper(method);
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out.insert(upper + " " + std::string(path));
    }
  }
  return out;
}

TEST(OpenApi, EveryImplementedRouteIsDocumentedAndEveryDocumentedOperationIsImplemented) {
  const json::value doc = load_document();
  const std::set<std::string> documented = documented_operations(doc);
  const auto& templates = http::Api::route_templates();
  const std::set<std::string> implemented(templates.begin(), templates.end());
  ASSERT_EQ(implemented.size(), templates.size()) << "a route is listed twice";
  ASSERT_FALSE(implemented.empty());
  for (const std::string& route : implemented) {
    EXPECT_TRUE(documented.count(route)) << route << " is served but not in docs/openapi.json";
  }
  for (const std::string& operation : documented) {
    EXPECT_TRUE(implemented.count(operation)) << operation << " is in docs/openapi.json but not served";
  }
}

TEST(OpenApi, EveryPathParameterIsDeclaredAndEveryOperationHasResponses) {
  const json::value doc = load_document();
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(std::string(doc.at("openapi").as_string()).rfind("3.", 0), 0u) << "not an OpenAPI 3 document";
  const std::regex param(R"(\{([a-z_]+)\})");
  for (const auto& [path, item] : doc.at("paths").as_object()) {
    const std::string p(path);
    std::set<std::string> in_path;
    for (std::sregex_iterator it(p.begin(), p.end(), param), end; it != end; ++it) in_path.insert((*it)[1]);
    for (const auto& [method, operation] : item.as_object()) {
      if (!kMethods.count(std::string(method))) continue;
      const json::object& op = operation.as_object();
      const std::string where = std::string(method) + " " + p;
      EXPECT_TRUE(op.contains("responses") && !op.at("responses").as_object().empty()) << where << " has no responses";
      std::set<std::string> declared;
      auto collect = [&](const json::object& holder) {
        if (auto* params = holder.if_contains("parameters")) {
          for (const auto& v : params->as_array()) {
            const json::object& o = v.as_object();
            if (o.contains("in") && o.at("in") == "path") declared.insert(std::string(o.at("name").as_string()));
          }
        }
      };
      collect(item.as_object());
      collect(op);
      EXPECT_EQ(declared, in_path) << where << ": path parameters declared otherwise than the path names them";
    }
  }
}

TEST(OpenApi, EveryReferenceResolves) {
  const json::value doc = load_document();
  std::vector<std::string> unresolved;
  std::function<void(const json::value&)> walk = [&](const json::value& v) {
    if (v.is_array()) {
      for (const auto& e : v.as_array()) walk(e);
    } else if (v.is_object()) {
      for (const auto& [k, e] : v.as_object()) {
        if (k == "$ref" && e.is_string()) {
          const std::string ref(e.as_string());
          if (ref.rfind("#/", 0) != 0) {
            unresolved.push_back(ref);
            continue;
          }
          boost::system::error_code ec;
          const json::value* target = doc.find_pointer(ref.substr(1), ec);
          if (!target) unresolved.push_back(ref);
        } else {
          walk(e);
        }
      }
    }
  };
  walk(doc);
  EXPECT_TRUE(unresolved.empty()) << "unresolved $ref: " << (unresolved.empty() ? "" : unresolved.front());
}

TEST(OpenApi, GetOpenapiJsonServesTheSameDocument) {
  const json::value doc = load_document();
  ServerProcess server(server_options());
  HttpClient anonymous(server.port());
  const HttpResponse r = anonymous.get("/openapi.json");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.header("Content-Type").rfind("application/json", 0), 0u) << r.header("Content-Type");
  const json::value served = r.json();
  ASSERT_TRUE(served.is_object()) << "the served document is not JSON";
  EXPECT_EQ(served, doc) << "GET /openapi.json differs from docs/openapi.json (rebuild?)";
}

}  // namespace
}  // namespace tollgate::httptest
